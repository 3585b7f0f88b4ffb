package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

func rates(rate ...float64) keyRates {
	r := keyRates{rate: rate}
	for range rate {
		r.cpu, r.machine = append(r.cpu, 0.001), append(r.machine, 2)
	}
	return r
}

func TestKeyRowMarkdown(t *testing.T) {
	file := keyRow{name: "file", label: "PEM file", algorithm: "P-256", callers: 64, raw: rates(10000, 12000, 11000), server: rates(1000, 800, 1200)}
	hsm := keyRow{name: "softhsm", label: "SoftHSM2", algorithm: "P-256", callers: 64, raw: rates(10000, 10000, 10000), server: rates(600, 560, 480)}
	sim := keyRow{name: "tpm-simulator", label: "sim", algorithm: "P-256", callers: 64, raw: rates(1000, 1000, 1000), socket: rates(900, 950, 1000), server: rates(500, 400, 450)}
	rows := []keyRow{file, hsm, sim}
	for _, tt := range []struct {
		r    keyRow
		want string
	}{
		// Ratios are each round's own: 600/1000, 560/800, 480/1200.
		{hsm, "| SoftHSM2 | softhsm | P-256 | 64 | 10000 | 1.000 | 560 | 1.000 | 0.56 / 2.00 | 0.06 (0.05–0.06) | 0.60 (0.40–0.70) |"},
		{sim, "| sim | tpm-simulator | P-256 | 64 | 1000 (over the server's socket: 950) | 1.000 | 450 | 1.000 | 0.45 / 2.00 | 0.45 (0.40–0.50) | 0.50 (0.38–0.50) |"},
		// The file key is its own anchor: no file ratio.
		{file, "| PEM file | file | P-256 | 64 | 11000 | 1.000 | 1000 | 1.000 | 1.00 / 2.00 | 0.10 (0.07–0.11) | – |"},
	} {
		if got := tt.r.markdown(rows); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.r.name, got, tt.want)
		}
	}
}

func TestHardwareTargets(t *testing.T) {
	rows := []keyRow{
		{name: "file", algorithm: "P-256", callers: 1, raw: rates(20000), server: rates(500)},
		{name: "swtpm", algorithm: "P-256", callers: 1, raw: rates(1500), server: rates(400)},
		{name: "file", algorithm: "P-256", callers: 64, raw: rates(20000), server: rates(1000)},
		{name: "softhsm", algorithm: "P-256", callers: 64, raw: rates(8000), server: rates(600)},
		{name: "softhsm-rsa", algorithm: "RSA-2048", callers: 64, raw: rates(1000), server: rates(300)}, // no file-rsa row: not judged
		{name: "softhsm", algorithm: "P-256", callers: 1, raw: rates(5000), server: rates(100)},         // one caller: no target
		{name: "swtpm", algorithm: "P-256", callers: 64, raw: rates(1000), server: rates(850)},
	}
	got := hardwareTargets(rows, 2)
	for _, want := range []string{
		// 400/1500; one caller: 2 ms of server after 0.67 ms of device, 500/(1500+500) = 0.25.
		"- swtpm, 1 caller: server / raw 0.27 (rounds 0.27–0.27; target ≥ 0.8): MISSES; one caller waits for the device (0.67 ms per signature) and for the server's own work (2.00 ms per issuance with the file key) in turn: at most 0.25 (0.25–0.25)\n",
		// 600/1000 is exactly the floor; 1 ms of CPU per issuance for both.
		"- softhsm, 64 callers: server / file key's server 0.60 (rounds 0.60–0.60; target ≥ 0.6): meets; CPU per issuance 1.000 ms against the file key's 1.000 ms",
		// 2 cores / 1 ms = 2000/s = 2 × raw.
		"- swtpm, 64 callers: server / raw 0.85 (rounds 0.85–0.85; target ≥ 0.8): meets; the server runs kept 0.85 of 2 cores busy (the machine 2.00) at 1.00 ms CPU per issuance, device included: 2 cores to ourselves would allow at most 2000/s, 2.00 × raw\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack\n%s\ngot\n%s", want, got)
		}
	}
	if strings.Contains(got, "softhsm-rsa") || strings.Contains(got, "softhsm, 1 caller") {
		t.Errorf("a row without a target was judged:\n%s", got)
	}
}

// TestSimSocket: the socket that serves the simulator to the server answers each connection's
// one command with the TPM's response, as swtpm's unixio server does.
func TestSimSocket(t *testing.T) {
	s := &simTPM{tpm: echoTPM{}}
	path := filepath.Join(t.TempDir(), "sim.sock")
	if err := s.serve(path); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for i := range 3 {
		cmd := make([]byte, 14)
		binary.BigEndian.PutUint16(cmd, 0x8001)
		binary.BigEndian.PutUint32(cmd[2:], uint32(len(cmd)))
		binary.BigEndian.PutUint32(cmd[10:], uint32(i))
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(cmd); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, cmd) {
			t.Errorf("command %d: response %x, want the echo %x", i, got, cmd)
		}
	}
}

// echoTPM answers every command with the command itself.
type echoTPM struct{}

func (echoTPM) Send(cmd []byte) ([]byte, error) { return bytes.Clone(cmd), nil }
func (echoTPM) Close() error                    { return nil }

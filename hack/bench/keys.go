package main

// -hardware: CA keys in hardware. For every keystore backend, the raw signatures per second
// of the key as keystore.Open gives it to the server (for an HSM or TPM key a
// keystore.Device: a timeout on every call), and the issuances per second of the real
// signet-server over gRPC with that key as its signer's CA key (default lint gate, mutual
// TLS; a Device's every signature verified by certsign), each with 1 and with many callers,
// over several interleaved rounds.

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/cacert"
	"github.com/signet-pki/signet/internal/softhsm"
	"github.com/signet-pki/signet/internal/swtpm"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/pemfile"
	"github.com/signet-pki/signet/server/config"
)

// hardwareBackendNames are the -hardware-backends names, in the table's order. file-rsa is
// the anchor of softhsm-rsa.
var hardwareBackendNames = []string{"file", "file-encrypted", "file-rsa", "softhsm", "softhsm-rsa", "tpm-simulator", "swtpm"}

// hardwareOpts selects the -hardware measurements.
type hardwareOpts struct {
	backends  []string
	callers   []int
	rounds    int
	benchtime time.Duration
}

// runHardwareReport is -hardware: it measures o, prints the table and, when out is set,
// writes it there too.
func runHardwareReport(ctx context.Context, o hardwareOpts, out string) error {
	if o.rounds < 1 || len(o.callers) == 0 {
		return fmt.Errorf("-hardware: want at least one round (got %d) and one caller count", o.rounds)
	}
	testing.Init()
	if err := flag.Set("test.benchtime", o.benchtime.String()); err != nil {
		return err
	}
	start := time.Now()
	rows, busy, err := runHardware(ctx, o)
	if err != nil {
		return err
	}
	table := hardwareTable(rows, o.rounds, o.benchtime, time.Since(start), busy)
	fmt.Print(table)
	if out != "" {
		return os.WriteFile(out, []byte(table), 0o644)
	}
	return nil
}

// keyCase is one CA key under test. The raw rate is that of key; the server opens serverURI
// (the same key) as its signer's CA key. The simulator's key is also opened through the
// socket the server reaches it by (viaSocket), to show what that socket costs by itself.
type keyCase struct {
	name, label, algorithm string
	key, viaSocket         keystore.Key
	serverURI              string
	// pids are the processes besides the bench whose CPU the key's signatures cost (swtpm).
	pids []int
}

// keyRates are one measurement per round: operations per second, CPU seconds (the bench and
// any device process) per operation, and the cores the whole machine kept busy meanwhile
// (other people's work included).
type keyRates struct{ rate, cpu, machine []float64 }

func (k *keyRates) add(m measurement) {
	k.rate, k.cpu, k.machine = append(k.rate, m.rate), append(k.cpu, m.cpuPerOp), append(k.machine, m.machineCores)
}

// measurement is one measureCPU.
type measurement struct{ rate, cpuPerOp, machineCores float64 }

// keyRow is one key at one number of callers.
type keyRow struct {
	name, label, algorithm string
	callers                int
	raw, socket, server    keyRates
}

// runHardware measures every backend of o and returns its rows, and how busy the machine
// was when the measurements began. The devices live in a temporary folder removed at the
// end; swtpm is stopped.
func runHardware(ctx context.Context, o hardwareOpts) ([]keyRow, float64, error) {
	for _, b := range o.backends {
		if !slices.Contains(hardwareBackendNames, b) {
			return nil, 0, fmt.Errorf("-hardware-backends: unknown backend %q (accepted: %s)", b, strings.Join(hardwareBackendNames, ", "))
		}
	}
	// Short: unix socket paths (swtpm's, the simulator's) are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "sbk-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	cases, err := openKeyCases(ctx, dir, o.backends, &closers)
	if err != nil {
		return nil, 0, err
	}
	csr, err := newCSR("bench-client")
	if err != nil {
		return nil, 0, err
	}
	servers := make([]func() error, len(cases))
	for i, c := range cases {
		sign, err := keyServer(c, csr, &closers)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: starting the server: %w", c.name, err)
		}
		servers[i] = sign
	}
	// Other work on the box skews every figure: wait a little for it to calm down.
	busy := waitQuiet(30 * time.Second)
	digest := sha256.Sum256([]byte("signet bench"))
	var rows []keyRow
	for _, callers := range o.callers {
		type call struct {
			into *keyRates
			fn   func() error
			pids []int
		}
		var calls []call
		cur := make([]keyRow, len(cases))
		for i, c := range cases {
			cur[i] = keyRow{name: c.name, label: c.label, algorithm: c.algorithm, callers: callers}
			r := &cur[i]
			calls = append(calls, call{&r.raw, signOnce(c.key, digest[:]), c.pids}, call{&r.server, servers[i], c.pids})
			if c.viaSocket != nil {
				calls = append(calls, call{&r.socket, signOnce(c.viaSocket, digest[:]), c.pids})
			}
		}
		for round := range o.rounds {
			for _, i := range roundOrder(len(calls), round) {
				calls[i].into.add(measureCPU(callers, calls[i].pids, calls[i].fn))
			}
			fmt.Fprintf(os.Stderr, "callers %d: round %d of %d done\n", callers, round+1, o.rounds)
		}
		rows = append(rows, cur...)
		for _, r := range cur {
			fmt.Fprintln(os.Stderr, r.markdown(cur))
		}
	}
	return rows, busy, nil
}

// signOnce returns a function making one signature of digest with key (ECDSA, or RSA
// PKCS #1 v1.5 over SHA-256).
func signOnce(key crypto.Signer, digest []byte) func() error {
	return func() error {
		_, err := key.Sign(rand.Reader, digest, crypto.SHA256)
		return err
	}
}

// measureCPU is measure, with the CPU seconds per call of the bench and of the processes
// pids, calibration rounds included, and the cores the whole machine kept busy (/proc/stat).
func measureCPU(callers int, pids []int, fn func() error) measurement {
	var n atomic.Int64
	counted := func() error {
		n.Add(1)
		return fn()
	}
	cpu0, other0 := cpuTime(), cpuSeconds(pids)
	busy0, total0 := cpuTotals()
	rate := measure(callers, counted)
	busy1, total1 := cpuTotals()
	cpu := (cpuTime() - cpu0).Seconds() + cpuSeconds(pids) - other0
	m := measurement{rate: rate, cpuPerOp: cpu / float64(max(n.Load(), 1))}
	if total1 > total0 {
		m.machineCores = (busy1 - busy0) / (total1 - total0) * float64(runtime.NumCPU())
	}
	return m
}

// openKeyCases creates and opens the key of every backend, adding what must be released to
// closers.
func openKeyCases(ctx context.Context, dir string, backends []string, closers *[]func()) ([]*keyCase, error) {
	var (
		cases []*keyCase
		hsm   *softhsm.Token
	)
	for _, b := range backends {
		var c *keyCase
		var err error
		switch b {
		case "file":
			c, err = fileKey(ctx, dir, b, keyerr.P256, false)
		case "file-encrypted":
			c, err = fileKey(ctx, dir, b, keyerr.P256, true)
		case "file-rsa":
			c, err = fileKey(ctx, dir, b, keyerr.RSA2048, false)
		case "softhsm", "softhsm-rsa":
			if hsm == nil {
				hsmDir := filepath.Join(dir, "hsm")
				if err := os.Mkdir(hsmDir, 0o700); err != nil {
					return nil, err
				}
				if hsm, err = newSoftHSM(hsmDir); err != nil {
					return nil, err
				}
			}
			alg := keyerr.P256
			if b == "softhsm-rsa" {
				alg = keyerr.RSA2048
			}
			c, err = deviceKey(ctx, b, "SoftHSM2 (PKCS#11 module in the process)", alg, hsm.URI("ca-"+b), keystore.Options{})
		case "tpm-simulator":
			c, err = simulatorKey(ctx, dir, closers)
		case "swtpm":
			c, err = swtpmKey(ctx, dir, closers)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b, err)
		}
		*closers = append(*closers, func() { closeKeys(c) })
		cases = append(cases, c)
	}
	return cases, nil
}

func closeKeys(c *keyCase) {
	for _, k := range []keystore.Key{c.key, c.viaSocket} {
		if k != nil {
			if err := k.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "closing the %s key: %v\n", c.name, err)
			}
		}
	}
}

// fileKey writes a fresh key of algorithm to a PEM file (encrypted PKCS#8 with a passphrase
// file, as an operator makes it with openssl, when encrypted) and opens it.
func fileKey(ctx context.Context, dir, name, algorithm string, encrypted bool) (*keyCase, error) {
	var key crypto.Signer
	var err error
	if algorithm == keyerr.RSA2048 {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return nil, err
	}
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(key)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+".key")
	if err := os.WriteFile(path, keyPEM, 0o600); err != nil {
		return nil, err
	}
	uri, label := path, "PEM file"
	if encrypted {
		plain, pass := path, filepath.Join(dir, name+".pass")
		path = filepath.Join(dir, name+".enc.key")
		if err := os.WriteFile(pass, []byte(randomHex(16)+"\n"), 0o600); err != nil {
			return nil, err
		}
		out, err := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", plain, "-out", path, "-passout", "file:"+pass).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("openssl pkcs8 -topk8: %w: %s", err, out)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, err
		}
		uri, label = "file://"+path+"?passphrase-file="+pass, "encrypted PKCS#8 file (PBES2, AES-256-CBC)"
	}
	k, err := keystore.Open(ctx, uri, keystore.Options{})
	if err != nil {
		return nil, err
	}
	return &keyCase{name: name, label: label, algorithm: algorithm, key: k, serverURI: uri}, nil
}

// deviceKey generates a key of algorithm inside the HSM or TPM uri names.
func deviceKey(ctx context.Context, name, label, algorithm, uri string, opts keystore.Options) (*keyCase, error) {
	k, made, err := keystore.Generate(ctx, uri, algorithm, opts)
	if err != nil {
		return nil, err
	}
	return &keyCase{name: name, label: label, algorithm: algorithm, key: k, serverURI: made}, nil
}

// simulatorKey makes a persistent P-256 key in the go-tpm-tools in-process simulator, opened
// through keystore.Options.TPM; the server, whose configuration cannot carry a transport,
// reaches the same simulator through a unix socket served by this process.
func simulatorKey(ctx context.Context, dir string, closers *[]func()) (*keyCase, error) {
	sim, err := openSimTPM()
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, sim.close)
	socket := filepath.Join(dir, "sim.sock")
	if err := sim.serve(socket); err != nil {
		return nil, err
	}
	const handle = "handle=0x81000100"
	c, err := deviceKey(ctx, "tpm-simulator", "TPM 2.0, go-tpm-tools simulator (in-process)", keyerr.P256, "tpm:"+handle, keystore.Options{TPM: sim.conn})
	if err != nil {
		return nil, err
	}
	c.serverURI = "tpm:" + handle + "?socket=" + socket
	if c.viaSocket, err = keystore.Open(ctx, c.serverURI, keystore.Options{}); err != nil {
		_ = c.key.Close()
		return nil, err
	}
	return c, nil
}

// swtpmKey starts swtpm and makes a persistent P-256 key in it, reached through its socket.
func swtpmKey(ctx context.Context, dir string, closers *[]func()) (*keyCase, error) {
	swDir := filepath.Join(dir, "sw")
	if err := os.Mkdir(swDir, 0o700); err != nil {
		return nil, err
	}
	sw, err := swtpm.Start(swDir)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, sw.Close)
	c, err := deviceKey(ctx, "swtpm", "TPM 2.0, swtpm (separate process, unix socket)", keyerr.P256,
		sw.URI("handle=0x81000100"), keystore.Options{})
	if err != nil {
		return nil, err
	}
	c.pids = []int{sw.PID()}
	return c, nil
}

// keyServer starts signet-server in this process with c's key as its signer's CA key, under a
// self-signed root made by the key itself (as signetctl ca init makes it), and returns a
// function that issues one certificate over gRPC.
func keyServer(c *keyCase, csr []byte, closers *[]func()) (func() error, error) {
	cert, err := cacert.SelfSigned(c.key, cacert.Options{Subject: pkix.Name{CommonName: "bench CA " + c.name}, Lifetime: 24 * time.Hour * 365})
	if err != nil {
		return nil, err
	}
	sign, _, cleanup, err := grpcServe(csr, func(dir string) (*config.Config, error) {
		certFile := filepath.Join(dir, "bench-ca.crt")
		if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644); err != nil {
			return nil, err
		}
		return signerConfig(dir, c.serverURI, certFile, true)
	})
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, cleanup)
	if err := sign(); err != nil {
		return nil, fmt.Errorf("first issuance: %w", err)
	}
	return sign, nil
}

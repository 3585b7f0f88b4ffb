package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/server/ledger"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// newLedger writes n records, one second apart from t0+1s, and returns the ledger directory.
func newLedger(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ledger")
	clk := testclock.NewFakeClock(t0)
	l, err := ledger.Open(dir, ledger.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 1; i <= n; i++ {
		clk.Step(time.Second)
		r := ledger.Record{
			Decision: ledger.Issued, Signer: "example.com/signer", ObjectUID: fmt.Sprint("uid-", i),
			Serial: fmt.Sprintf("%x", i), Certificate: "-----BEGIN CERTIFICATE-----\n…\n-----END CERTIFICATE-----\n",
		}
		if _, err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLedgerVerifyOK(t *testing.T) {
	dir := newLedger(t, 5)
	code, out, errOut := runCmd("ledger", "verify", "--dir", dir)
	want := "ledger OK: 5 records, seq 1–5, 2026-11-21T10:00:01Z → 2026-11-21T10:00:05Z\n"
	if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "last hash: ") || errOut != "" {
		t.Errorf("exit %d\nstdout %q\nstderr %q\nwant exit 0 and %q", code, out, errOut, want)
	}
	code, out, _ = runCmd("ledger", "verify", "--dir", newLedger(t, 0))
	if code != 0 || out != "ledger OK: 0 records\n" {
		t.Errorf("empty ledger: exit %d, %q", code, out)
	}
}

func TestLedgerVerifyTampered(t *testing.T) {
	dir := newLedger(t, 5)
	seg := filepath.Join(dir, "ledger-000001.jsonl")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	lines[2] = strings.Replace(lines[2], `"uid-3"`, `"uid-9"`, 1)
	if err := os.WriteFile(seg, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCmd("ledger", "verify", "--dir", dir)
	want := "ledger BROKEN: record 3 (line 3 of ledger-000001.jsonl): hash mismatch — the record was changed\n" +
		"intact before the problem: 2 records, seq 1–2, 2026-11-21T10:00:01Z → 2026-11-21T10:00:02Z\n"
	if code != 1 || out != want {
		t.Errorf("exit %d\nstdout %q\nwant exit 1 and %q", code, out, want)
	}
}

// writeAfterRecords writes b into the ledger's segment off bytes after its last record, in
// the zero-filled free space the server keeps there.
func writeAfterRecords(t *testing.T, dir, b string, off int64) {
	t.Helper()
	seg := filepath.Join(dir, "ledger-000001.jsonl")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := strings.LastIndexByte(string(data), '\n') + 1
	if strings.Trim(string(data[end:]), "\x00") != "" || len(data)-end < 2<<20 {
		t.Fatalf("the segment does not end with free space: %d bytes after the last record", len(data)-end)
	}
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(b), int64(end)+off); err != nil {
		t.Fatal(err)
	}
}

func TestLedgerVerifyTornTail(t *testing.T) {
	dir := newLedger(t, 2)
	writeAfterRecords(t, dir, `{"seq":3,"ti`, 0)
	code, out, _ := runCmd("ledger", "verify", "--dir", dir)
	if code != 0 || !strings.HasPrefix(out, "ledger OK: 2 records") || !strings.Contains(out, "torn final write of 12 bytes") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
}

// TestLedgerVerifyDataInFreeSpace: bytes far into the free space after the last record, where
// no write of the server reaches, are a problem, located by line.
func TestLedgerVerifyDataInFreeSpace(t *testing.T) {
	dir := newLedger(t, 2)
	writeAfterRecords(t, dir, `{"seq":3}`, 2<<20)
	code, out, _ := runCmd("ledger", "verify", "--dir", dir)
	want := "ledger BROKEN: line 3 of ledger-000001.jsonl (offset "
	if code != 1 || !strings.HasPrefix(out, want) || !strings.Contains(out, "data in the zero-filled free space after the last record") ||
		!strings.Contains(out, "intact before the problem: 2 records, seq 1–2") {
		t.Errorf("exit %d\nstdout %q\nwant exit 1 and %q…", code, out, want)
	}
}

func TestLedgerVerifyMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	code, out, errOut := runCmd("ledger", "verify", "--dir", dir)
	if code != 1 || out != "" || !strings.Contains(errOut, dir) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

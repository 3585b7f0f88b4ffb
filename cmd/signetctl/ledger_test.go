package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
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
	if code != 2 || out != "" || !strings.Contains(errOut, dir) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// mixedLedger writes an issued record with a real certificate, a refusal, and two issued
// records of another signer, one second apart from t0+1s, and returns the directory and the
// certificate.
func mixedLedger(t *testing.T) (string, *x509.Certificate) {
	t.Helper()
	leaf, _, _ := testChain(t)
	dir := filepath.Join(t.TempDir(), "ledger")
	clk := testclock.NewFakeClock(t0)
	l, err := ledger.Open(dir, ledger.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, r := range []ledger.Record{
		{Decision: ledger.Issued, Signer: "example.com/serving", Client: "watcher", Requester: "system:node:w1", ObjectUID: "uid-a",
			ObjectKind: "CertificateSigningRequest", Serial: leaf.SerialNumber.Text(16), NotAfter: leaf.NotAfter, Certificate: string(testpki.CertPEM(leaf))},
		{Decision: ledger.Refused, Signer: "example.com/serving", Client: "watcher", ObjectUID: "uid-b", Reason: "POLICY_VIOLATION", Message: "usages: no cert sign"},
		{Decision: ledger.Issued, Signer: "example.com/pods", ObjectUID: "uid-c", ObjectKind: "PodCertificateRequest", Serial: "0a", Certificate: "x"},
		{Decision: ledger.Issued, Signer: "example.com/pods", ObjectUID: "uid-d", ObjectKind: "PodCertificateRequest", Serial: "0b", Certificate: "x"},
	} {
		clk.Step(time.Second)
		if _, err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return dir, leaf
}

// seqsOf returns the first column (seq) of each line of a ledger list table.
func seqsOf(out string) string {
	var seqs []string
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); i > 0 && len(f) > 0 {
			seqs = append(seqs, f[0])
		}
	}
	return strings.Join(seqs, ",")
}

func TestLedgerList(t *testing.T) {
	dir, leaf := mixedLedger(t)
	code, out, errOut := runCmd("ledger", "list", "--dir", dir)
	t.Logf("output:\n%s", out)
	if code != 0 || seqsOf(out) != "1,2,3,4" || !strings.HasPrefix(out, "SEQ  TIME ") {
		t.Fatalf("list: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"csr/uid-a  serial " + leaf.SerialNumber.Text(16), "refused   example.com/serving  csr/uid-b  POLICY_VIOLATION", "pcr/uid-c"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	colons := colonHex(leaf.SerialNumber.Text(16))
	if len(leaf.SerialNumber.Text(16))%2 == 1 {
		colons = colonHex("0" + leaf.SerialNumber.Text(16))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--signer", "example.com/pods"}, "3,4"},
		{[]string{"--decision", "refused"}, "2"},
		{[]string{"--decision", "refused,issued", "--signer", "example.com/serving"}, "1,2"},
		{[]string{"--uid", "uid-c"}, "3"},
		{[]string{"--serial", "0x0A"}, "3"},
		{[]string{"--serial", colons}, "1"},
		{[]string{"--reason", "policy_violation"}, "2"},
		{[]string{"--client", "watcher"}, "1,2"},
		{[]string{"--since", "2026-11-21T10:00:02Z", "--until", "2026-11-21T10:00:04Z"}, "2,3"},
		{[]string{"--since", "2026-11-21"}, "1,2,3,4"},
		{[]string{"--limit", "2"}, "3,4"},
	} {
		code, out, errOut := runCmd(append([]string{"ledger", "list", "--dir", dir}, tc.args...)...)
		if code != 0 || seqsOf(out) != tc.want {
			t.Errorf("%v: exit %d, seqs %q, want %q; stderr %q", tc.args, code, seqsOf(out), tc.want, errOut)
		}
	}
	if code, out, _ = runCmd("ledger", "list", "--dir", dir, "--uid", "none"); code != 0 || out != "no records match\n" {
		t.Errorf("no match: exit %d, stdout %q", code, out)
	}
	code, out, _ = runCmd("ledger", "list", "--dir", dir, "--signer", "example.com/pods", "-o", "json")
	var recs []ledger.Record
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil || len(recs) != 2 || recs[0].Seq != 3 || recs[1].Hash == "" {
		t.Errorf("-o json: exit %d, %v, %+v", code, err, recs)
	}
	if code, out, _ = runCmd("ledger", "list", "--dir", dir, "--uid", "none", "-o", "json"); code != 0 || out != "[]\n" {
		t.Errorf("no match in json: exit %d, stdout %q", code, out)
	}
	for _, args := range [][]string{{"--since", "yesterday"}, {"--until", "2026-01-01", "--since", "2026-02-01"}, {"--decision", "maybe"},
		{"--serial", "xyz"}, {"--limit", "-1"}, {"extra"}} {
		if code, out, errOut := runCmd(append([]string{"ledger", "list", "--dir", dir}, args...)...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, out, errOut)
		}
	}
}

func TestLedgerShow(t *testing.T) {
	dir, leaf := mixedLedger(t)
	code, out, errOut := runCmd("ledger", "show", "--dir", dir, "--serial", leaf.SerialNumber.Text(16))
	t.Logf("output:\n%s", out)
	for _, want := range []string{"record 1\n", "  Decision:        issued\n", "  Requester:       system:node:w1\n",
		"  Object:          CertificateSigningRequest uid-a\n", "  Certificate:\n    Subject:    CN=web.example.com,O=Example\n", "  Hash:            "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show --serial: exit %d (stderr %q), output lacks %q", code, errOut, want)
		}
	}
	if strings.Contains(out, "BEGIN CERTIFICATE") {
		t.Error("show printed the PEM without --pem")
	}
	if code, out, _ = runCmd("ledger", "show", "--dir", dir, "1", "--pem"); code != 0 || !strings.Contains(out, string(testpki.CertPEM(leaf))) {
		t.Errorf("show --pem: exit %d, output:\n%s", code, out)
	}
	code, out, _ = runCmd("ledger", "show", "--dir", dir, "2", "4")
	if code != 0 || !strings.Contains(out, "record 2\n") || !strings.Contains(out, "  Message:         usages: no cert sign\n") || !strings.Contains(out, "\n\nrecord 4\n") {
		t.Errorf("show 2 4: exit %d, output:\n%s", code, out)
	}
	code, out, _ = runCmd("ledger", "show", "--dir", dir, "--uid", "uid-b", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "reason: POLICY_VIOLATION\n") || !strings.Contains(out, "- seq: 2\n") && !strings.Contains(out, "  seq: 2\n") {
		t.Errorf("show -o yaml: exit %d, output:\n%s", code, out)
	}
	if code, out, errOut = runCmd("ledger", "show", "--dir", dir, "9"); code != 1 || out != "" || !strings.Contains(errOut, "no record matches") {
		t.Errorf("show of no record: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, _ = runCmd("ledger", "show", "--dir", dir, "x"); code != 2 {
		t.Errorf("show x: exit %d, want 2", code)
	}
	if code, _, _ = runCmd("ledger", "show", "--dir", filepath.Join(t.TempDir(), "none"), "1"); code != 2 {
		t.Errorf("show on a missing ledger: exit %d, want 2", code)
	}
}

// TestLedgerListBroken: a broken ledger lists the records before the problem and exits 1.
func TestLedgerListBroken(t *testing.T) {
	dir := newLedger(t, 5)
	seg := filepath.Join(dir, "ledger-000001.jsonl")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, []byte(strings.Replace(string(b), `"uid-4"`, `"uid-9"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("ledger", "list", "--dir", dir)
	if code != 1 || seqsOf(out) != "1,2,3" || !strings.Contains(errOut, "hash mismatch") {
		t.Errorf("exit %d, seqs %q, stderr %q", code, seqsOf(out), errOut)
	}
}

func TestLedgerVerifyJSON(t *testing.T) {
	code, out, _ := runCmd("ledger", "verify", "--dir", newLedger(t, 3), "-o", "json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || !rep.OK || rep.Records != 3 || rep.LastSeq != 3 || rep.LastHash == "" {
		t.Errorf("exit %d, %v, %+v", code, err, rep)
	}
}

package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
)

// testOrigin is the origin of the checkpoints the offline tests sign.
const testOrigin = "signet.example/ledger"

// issuedRecord is record i of a test ledger, like server/ledger's tests' issued(i): a serial
// with leading zeros, object uid-000i.
func issuedRecord(i int) ledger.Record {
	return ledger.Record{
		Decision: ledger.Issued, Signer: "example.com/signer", Client: "spiffe://signet/watcher", Requester: "system:node:worker-1",
		ObjectUID: fmt.Sprintf("uid-%04d", i), IdempotencyKey: fmt.Sprintf("uid-%04d/abcd", i), RequestHash: strings.Repeat("ab", 32),
		Serial: fmt.Sprintf("%032x", i+1), NotBefore: t0.Add(-5 * time.Minute), NotAfter: t0.Add(24 * time.Hour), Message: "issued",
		Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
	}
}

// writeLedger writes recs, one second apart from t0+1s, to a new ledger and returns its
// directory.
func writeLedger(t *testing.T, recs ...ledger.Record) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ledger")
	clk := testclock.NewFakeClock(t0)
	l, err := ledger.Open(dir, ledger.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, r := range recs {
		clk.Step(time.Second)
		if _, err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// issuedLedger writes the records issuedRecord(1..n).
func issuedLedger(t *testing.T, n int) string {
	t.Helper()
	recs := make([]ledger.Record, n)
	for i := range recs {
		recs[i] = issuedRecord(i + 1)
	}
	return writeLedger(t, recs...)
}

// checkpointKey is a checkpoint signing key and the file of its public half.
type checkpointKey struct {
	signer  crypto.Signer
	pubFile string
}

// newCheckpointKey makes an Ed25519 or (alg "ecdsa") ECDSA P-256 key and writes its public
// half as ledgerproof's PEM.
func newCheckpointKey(t *testing.T, alg string) checkpointKey {
	t.Helper()
	var (
		signer crypto.Signer
		err    error
	)
	if alg == "ecdsa" {
		signer, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		_, signer, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	pem, err := ledgerproof.MarshalPublicKeyPEM(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	return checkpointKey{signer: signer, pubFile: writeTemp(t, alg+".pub", pem)}
}

// segmentLines reads the records of the ledger in dir as stored: the segment's lines before
// its free space, without newlines. It reads the file itself, not through ledger.Leaves.
func segmentLines(t *testing.T, dir string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "ledger-000001.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return nil
	}
	return bytes.Split(data[:end], []byte("\n"))
}

// signedCheckpoint signs the checkpoint of the first size records of the ledger in dir with
// key under origin.
func signedCheckpoint(t *testing.T, dir string, key crypto.Signer, origin string, size int) []byte {
	t.Helper()
	var tree ledgerproof.Tree
	for _, line := range segmentLines(t, dir)[:size] {
		if _, err := tree.Append(line); err != nil {
			t.Fatal(err)
		}
	}
	c, err := tree.Checkpoint(origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledgerproof.NewNoteSigner(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := ledgerproof.SignCheckpoint(c, s)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// checkpointFile signs a checkpoint (signedCheckpoint) and writes it to a temporary file.
func checkpointFile(t *testing.T, dir string, key crypto.Signer, origin string, size int) string {
	t.Helper()
	return writeTemp(t, fmt.Sprintf("checkpoint-%d", size), signedCheckpoint(t, dir, key, origin, size))
}

func TestLedgerAuditOK(t *testing.T) {
	for _, alg := range []string{"ed25519", "ecdsa"} {
		t.Run(alg, func(t *testing.T) {
			dir := issuedLedger(t, 5)
			key := newCheckpointKey(t, alg)
			cp5 := checkpointFile(t, dir, key.signer, testOrigin, 5)
			root := strings.Split(string(signedCheckpoint(t, dir, key.signer, testOrigin, 5)), "\n")[2]
			code, out, errOut := runCmd("ledger", "audit", "--dir", dir, "--checkpoint", cp5, "--key", key.pubFile)
			want := "ledger audit OK: 5 records; checkpoint of size 5 (origin " + testOrigin + ") is a prefix of the ledger; root " + root + "\n"
			if code != 0 || out != want || errOut != "" {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant exit 0 and %q", code, out, errOut, want)
			}

			// A series of checkpoints, as a witness keeps them, with the origin pinned.
			cp2, cp0 := checkpointFile(t, dir, key.signer, testOrigin, 2), checkpointFile(t, dir, key.signer, testOrigin, 0)
			code, out, errOut = runCmd("ledger", "audit", "--dir", dir, "--key", key.pubFile, "--origin", testOrigin,
				"--checkpoint", cp0, "--checkpoint", cp2, "--checkpoint", cp5)
			if code != 0 || !strings.HasPrefix(out, "ledger audit OK: 5 records; 3 checkpoints are prefixes of the ledger:\n") ||
				!strings.Contains(out, "  "+cp2+": size 2 (origin "+testOrigin+"), root ") {
				t.Errorf("series: exit %d\nstdout %q\nstderr %q", code, out, errOut)
			}

			// A checkpoint older than the ledger is a prefix too; -o json.
			code, out, _ = runCmd("ledger", "audit", "--dir", dir, "--key", key.pubFile, "--checkpoint", cp2, "-o", "json")
			var rep auditReport
			if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || !rep.OK || rep.Records != 5 || rep.LastSeq != 5 ||
				len(rep.Checkpoints) != 1 || rep.Checkpoints[0].Size != 2 || rep.Checkpoints[0].Origin != testOrigin || rep.Root != root {
				t.Errorf("-o json: exit %d, %v, %+v", code, err, rep)
			}
		})
	}
}

// TestLedgerAuditFails: every way a ledger can fail a checkpoint is exit 1 and named.
func TestLedgerAuditFails(t *testing.T) {
	for _, alg := range []string{"ed25519", "ecdsa"} {
		t.Run(alg, func(t *testing.T) {
			key := newCheckpointKey(t, alg)
			other := newCheckpointKey(t, alg)
			dir := issuedLedger(t, 5)
			cp5 := checkpointFile(t, dir, key.signer, testOrigin, 5)

			// Another history of the same length: record 3 differs, the chain is intact.
			recs := make([]ledger.Record, 5)
			for i := range recs {
				recs[i] = issuedRecord(i + 1)
			}
			recs[2].Requester = "mallory"
			forked := writeLedger(t, recs...)

			// The last record removed after the checkpoint was signed: the segment cut right
			// after the previous record's newline, the rest zeroed (free space).
			cut := issuedLedger(t, 5)
			cpCut := checkpointFile(t, cut, key.signer, testOrigin, 5)
			seg := filepath.Join(cut, "ledger-000001.jsonl")
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			lines := segmentLines(t, cut)
			end := len(bytes.Join(lines[:4], []byte("\n"))) + 1
			clear(data[end:])
			if err := os.WriteFile(seg, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if code, out, _ := runCmd("ledger", "verify", "--dir", cut); code != 0 || !strings.HasPrefix(out, "ledger OK: 4 records") {
				t.Fatalf("the cut ledger must verify on its own: exit %d, %q", code, out)
			}

			// A checkpoint changed after signing.
			changed := bytes.Replace(signedCheckpoint(t, dir, key.signer, testOrigin, 5), []byte("\n5\n"), []byte("\n4\n"), 1)

			// A broken record.
			broken := issuedLedger(t, 5)
			cpBroken := checkpointFile(t, broken, key.signer, testOrigin, 5)
			seg = filepath.Join(broken, "ledger-000001.jsonl")
			if data, err = os.ReadFile(seg); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(seg, bytes.Replace(data, []byte(`"uid-0004"`), []byte(`"uid-0009"`), 1), 0o600); err != nil {
				t.Fatal(err)
			}

			for _, tc := range []struct {
				name   string
				args   []string
				reason string
				want   []string
			}{
				{"last record cut", []string{"--dir", cut, "--checkpoint", cpCut}, reasonLedgerShorter,
					[]string{"the ledger has 4 records, fewer than the 5 the checkpoint covers", "records were removed from its end or the directory was replaced by an older copy"}},
				{"another key", []string{"--dir", dir, "--checkpoint", checkpointFile(t, dir, other.signer, testOrigin, 5)}, reasonUnknownKey,
					[]string{"no signature by the trusted key", "signed by another key"}},
				{"changed checkpoint", []string{"--dir", dir, "--checkpoint", writeTemp(t, "changed", changed)}, reasonBadSignature,
					[]string{"bad signature", "changed after it was signed"}},
				{"another origin", []string{"--dir", dir, "--checkpoint", cp5, "--origin", "signet.example/other"}, reasonWrongOrigin,
					[]string{"wrong origin", `not of --origin "signet.example/other"`}},
				{"another history", []string{"--dir", forked, "--checkpoint", cp5}, reasonOtherHistory,
					[]string{"the root of the ledger's first 5 records is ", "another history"}},
				{"a broken record", []string{"--dir", broken, "--checkpoint", cpBroken}, reasonLedgerBroken,
					[]string{"the ledger is broken: record 4 (line 4 of ledger-000001.jsonl): hash mismatch"}},
				{"second of a series", []string{"--dir", cut, "--checkpoint", checkpointFile(t, cut, key.signer, testOrigin, 3), "--checkpoint", cpCut}, reasonLedgerShorter,
					[]string{"checkpoint " + cpCut + ": the ledger has 4 records"}},
			} {
				args := append([]string{"ledger", "audit", "--key", key.pubFile}, tc.args...)
				code, out, errOut := runCmd(args...)
				t.Logf("%s:\n%s", tc.name, out)
				if code != 1 || !strings.HasPrefix(out, "ledger audit FAILED: ") || errOut != "" {
					t.Errorf("%s: exit %d\nstdout %q\nstderr %q\nwant exit 1 and ledger audit FAILED", tc.name, code, out, errOut)
				}
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Errorf("%s: output lacks %q:\n%s", tc.name, w, out)
					}
				}
				code, out, _ = runCmd(append(args, "-o", "json")...)
				var rep auditReport
				if err := json.Unmarshal([]byte(out), &rep); code != 1 || err != nil || rep.OK || rep.Reason != tc.reason || rep.Problem == "" {
					t.Errorf("%s -o json: exit %d, %v, %+v; want reason %s", tc.name, code, err, rep, tc.reason)
				}
			}
		})
	}
}

// TestLedgerAuditInputErrors: what cannot be read is exit 2.
func TestLedgerAuditInputErrors(t *testing.T) {
	dir := issuedLedger(t, 2)
	key := newCheckpointKey(t, "ed25519")
	cp := checkpointFile(t, dir, key.signer, testOrigin, 2)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir", dir, "--checkpoint", cp, "--key", missing}, "reading --key"},
		{[]string{"--dir", dir, "--checkpoint", cp, "--key", cp}, "--key " + cp},
		{[]string{"--dir", dir, "--checkpoint", missing, "--key", key.pubFile}, "reading --checkpoint"},
		{[]string{"--dir", missing, "--checkpoint", cp, "--key", key.pubFile}, missing},
		{[]string{"--dir", dir, "--key", key.pubFile}, `"checkpoint" not set`},
		{[]string{"--dir", dir, "--checkpoint", cp}, `"key" not set`},
		{[]string{"--dir", dir, "--checkpoint", cp, "--key", key.pubFile, "-o", "xml"}, "--output"},
	} {
		code, out, errOut := runCmd(append([]string{"ledger", "audit"}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/servertest"
	"github.com/signet-pki/signet/signerclient"
)

// proveLedger writes issuedRecord(1..6) and a refusal of uid-0003's next request (seq 7), and
// a checkpoint of all 7 records signed with key in DIR/checkpoint, where the server keeps it.
func proveLedger(t *testing.T, key crypto.Signer) string {
	t.Helper()
	var recs []ledger.Record
	for i := 1; i <= 6; i++ {
		recs = append(recs, issuedRecord(i))
	}
	recs = append(recs, ledger.Record{Decision: ledger.Refused, Signer: "example.com/signer", ObjectUID: "uid-0003", Reason: "POLICY_VIOLATION", Message: "no"})
	dir := writeLedger(t, recs...)
	if err := os.WriteFile(filepath.Join(dir, "checkpoint"), signedCheckpoint(t, dir, key, testOrigin, 7), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// parseBundle parses an inclusion bundle printed by prove.
func parseBundle(t *testing.T, out string) ledgerproof.InclusionBundle {
	t.Helper()
	b, err := ledgerproof.ParseInclusionBundle([]byte(out))
	if err != nil {
		t.Fatalf("prove printed no bundle: %v\n%s", err, out)
	}
	return b
}

func TestLedgerProveVerifyRoundTrip(t *testing.T) {
	for _, alg := range []string{"ed25519", "ecdsa"} {
		t.Run(alg, func(t *testing.T) {
			key := newCheckpointKey(t, alg)
			dir := proveLedger(t, key.signer)
			for _, tc := range []struct {
				args     []string
				seq      int64
				decision string
			}{
				{[]string{"--serial", "00000000000000000000000000000005"}, 4, "issued"},
				{[]string{"--serial", "0x5"}, 4, "issued"},
				{[]string{"--serial", "00:00:07"}, 6, "issued"},
				{[]string{"--uid", "uid-0003"}, 7, "refused"},
				{[]string{"--uid", "uid-0001"}, 1, "issued"},
				{[]string{"--seq", "6"}, 6, "issued"},
			} {
				code, out, errOut := runCmd(append([]string{"ledger", "prove", "--dir", dir}, tc.args...)...)
				if code != 0 || errOut != "" {
					t.Fatalf("prove %v: exit %d, stderr %q", tc.args, code, errOut)
				}
				if b := parseBundle(t, out); b.Index != tc.seq-1 || !strings.Contains(string(b.SignedCheckpoint), testOrigin+"\n7\n") {
					t.Errorf("prove %v: index %d, checkpoint %q; want index %d in the checkpoint of size 7", tc.args, b.Index, b.SignedCheckpoint, tc.seq-1)
				}
				bundle := writeTemp(t, "record.proof", []byte(out))
				code, vout, errOut := runCmd("ledger", "verify-proof", "--key", key.pubFile, bundle)
				wantHead := "inclusion proof OK: record " + itoa(tc.seq) + " is in the checkpoint of size 7 (origin " + testOrigin + "), root "
				if code != 0 || !strings.HasPrefix(vout, wantHead) || !strings.Contains(vout, "  Decision:  "+tc.decision+"\n") || errOut != "" {
					t.Errorf("verify-proof of %v: exit %d\nstdout %q\nstderr %q\nwant %q…", tc.args, code, vout, errOut, wantHead)
				}
				if tc.decision == "issued" && !strings.Contains(vout, "  Serial:    ") {
					t.Errorf("verify-proof of %v shows no serial:\n%s", tc.args, vout)
				}
				// From stdin, with the origin pinned, as JSON.
				code, vout, _ = runIn([]byte(out), "ledger", "verify-proof", "--key", key.pubFile, "--origin", testOrigin, "-o", "json", "-")
				var rep proofReport
				if err := json.Unmarshal([]byte(vout), &rep); code != 0 || err != nil || !rep.OK || rep.Kind != "inclusion" || rep.Seq != uint64(tc.seq) ||
					rep.Decision != tc.decision || rep.Size != 7 || rep.Origin != testOrigin {
					t.Errorf("verify-proof - -o json of %v: exit %d, %v, %+v", tc.args, code, err, rep)
				}
			}
		})
	}
}

// itoa is the decimal of n.
func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestLedgerVerifyProofFails: a bundle changed in one byte of its leaf, checked with another
// key or for another origin, fails with exit 1 and the reason.
func TestLedgerVerifyProofFails(t *testing.T) {
	for _, alg := range []string{"ed25519", "ecdsa"} {
		t.Run(alg, func(t *testing.T) {
			key := newCheckpointKey(t, alg)
			dir := proveLedger(t, key.signer)
			code, out, errOut := runCmd("ledger", "prove", "--dir", dir, "--serial", "3")
			if code != 0 {
				t.Fatalf("prove: exit %d, stderr %q", code, errOut)
			}
			b := parseBundle(t, out)
			changed := b
			changed.Leaf = bytes.Replace(bytes.Clone(b.Leaf), []byte("worker-1"), []byte("worker-2"), 1)
			if bytes.Equal(changed.Leaf, b.Leaf) {
				t.Fatal("the leaf was not changed")
			}
			moved := b
			moved.Index = 0 // the proof of leaf 1 presented as leaf 0's
			for _, tc := range []struct {
				name, bundle, key string
				args              []string
				reason            string
				want              []string
			}{
				{"one byte of the leaf", string(changed.Marshal()), key.pubFile, nil, reasonNotIncluded, []string{"inclusion proof does not verify"}},
				{"another position", string(moved.Marshal()), key.pubFile, nil, reasonNotIncluded, []string{"inclusion proof does not verify"}},
				{"another key", out, newCheckpointKey(t, alg).pubFile, nil, reasonUnknownKey, []string{"no signature by the trusted key", "signed by another key"}},
				{"another origin", out, key.pubFile, []string{"--origin", "signet.example/other"}, reasonWrongOrigin, []string{"wrong origin"}},
				{"not a bundle", "hello\n", key.pubFile, nil, reasonMalformed, []string{"not a Signet proof bundle"}},
				{"cut short", out[:len(out)/2], key.pubFile, nil, reasonMalformed, []string{"malformed proof bundle"}},
			} {
				file := writeTemp(t, "bundle", []byte(tc.bundle))
				args := append([]string{"ledger", "verify-proof", "--key", tc.key, file}, tc.args...)
				code, vout, errOut := runCmd(args...)
				t.Logf("%s:\n%s", tc.name, vout)
				if code != 1 || !strings.Contains(vout, "FAILED: ") || errOut != "" {
					t.Errorf("%s: exit %d\nstdout %q\nstderr %q\nwant exit 1 and FAILED", tc.name, code, vout, errOut)
				}
				for _, w := range tc.want {
					if !strings.Contains(vout, w) {
						t.Errorf("%s: output lacks %q:\n%s", tc.name, w, vout)
					}
				}
				code, vout, _ = runCmd(append(args, "-o", "yaml")...)
				if code != 1 || !strings.Contains(vout, "reason: "+tc.reason+"\n") || !strings.Contains(vout, "ok: false\n") {
					t.Errorf("%s -o yaml: exit %d, output:\n%s\nwant reason %s", tc.name, code, vout, tc.reason)
				}
			}
			for _, args := range [][]string{
				{"--key", key.pubFile, filepath.Join(t.TempDir(), "missing")},
				{"--key", filepath.Join(t.TempDir(), "missing"), writeTemp(t, "b", []byte(out))},
				{"--key", key.pubFile},
				{writeTemp(t, "b", []byte(out))},
			} {
				if code, vout, errOut := runCmd(append([]string{"ledger", "verify-proof"}, args...)...); code != 2 || vout != "" || errOut == "" {
					t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2", args, code, vout, errOut)
				}
			}
		})
	}
}

// TestLedgerVerifyProofConsistency: verify-proof reads a consistency bundle by its header; one
// whose newer checkpoint is smaller is evidence of a rollback.
func TestLedgerVerifyProofConsistency(t *testing.T) {
	key := newCheckpointKey(t, "ecdsa")
	dir := proveLedger(t, key.signer)
	var tree ledgerproof.Tree
	for _, line := range segmentLines(t, dir) {
		if _, err := tree.Append(line); err != nil {
			t.Fatal(err)
		}
	}
	proof, err := tree.ProveConsistency(3, 7)
	if err != nil {
		t.Fatal(err)
	}
	old, newer := signedCheckpoint(t, dir, key.signer, testOrigin, 3), signedCheckpoint(t, dir, key.signer, testOrigin, 7)
	good := ledgerproof.ConsistencyBundle{Old: old, New: newer, Proof: proof}
	code, out, errOut := runCmd("ledger", "verify-proof", "--key", key.pubFile, writeTemp(t, "c", good.Marshal()))
	if code != 0 || !strings.HasPrefix(out, "consistency proof OK: the log "+testOrigin+" of size 7 (root ") || !strings.Contains(out, "extends its size 3") {
		t.Errorf("consistency: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	shrunk := ledgerproof.ConsistencyBundle{Old: newer, New: old}
	code, out, _ = runCmd("ledger", "verify-proof", "--key", key.pubFile, writeTemp(t, "c", shrunk.Marshal()))
	if code != 1 || !strings.HasPrefix(out, "consistency proof FAILED: ") || !strings.Contains(out, "log shrank") {
		t.Errorf("shrunk: exit %d, stdout %q", code, out)
	}
}

// TestLedgerProveRefuses: a record the checkpoint does not cover yet, no record, a broken
// ledger, and the usage errors.
func TestLedgerProveRefuses(t *testing.T) {
	key := newCheckpointKey(t, "ed25519")
	dir := proveLedger(t, key.signer)
	cp3 := checkpointFile(t, dir, key.signer, testOrigin, 3)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--dir", dir, "--seq", "5", "--checkpoint", cp3}, 1, "record 5 is not yet covered by this checkpoint (" + cp3 + ", of size 3)"},
		{[]string{"--dir", dir, "--uid", "uid-0003", "--checkpoint", cp3}, 1, "record 7 is not yet covered by this checkpoint"},
		{[]string{"--dir", dir, "--seq", "8"}, 1, "no record matches --seq 8"},
		{[]string{"--dir", dir, "--serial", "ff"}, 1, "no record matches --serial ff"},
		{[]string{"--dir", issuedLedger(t, 2), "--seq", "1", "--checkpoint", cp3}, 1, "has 2 records, fewer than the 3 the checkpoint " + cp3 + " covers"},
		{[]string{"--dir", dir, "--seq", "1", "--checkpoint", filepath.Join(t.TempDir(), "none")}, 2, "reading --checkpoint"},
		{[]string{"--dir", dir}, 2, "give exactly one of --serial, --uid and --seq"},
		{[]string{"--dir", dir, "--seq", "1", "--uid", "u"}, 2, "give exactly one of --serial, --uid and --seq"},
		{[]string{"--dir", dir, "--seq", "0"}, 2, "--seq must be positive"},
		{[]string{"--dir", dir, "--serial", "xyz"}, 2, "not a hexadecimal serial number"},
		{[]string{"--dir", dir, "--seq", "1", "--server", "127.0.0.1:1"}, 2, "--server asks the server, --dir reads the ledger on this host"},
		{[]string{"--dir", dir, "--seq", "1", "--tree-size", "3"}, 2, "--tree-size asks the server"},
		{[]string{"--seq", "1", "--checkpoint", cp3}, 2, "--checkpoint needs --dir"},
	} {
		code, out, errOut := runCmd(append([]string{"ledger", "prove"}, tc.args...)...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}

	// The same length, another history: no proof against the checkpoint.
	forked := proveLedger(t, key.signer)
	if err := os.WriteFile(filepath.Join(forked, "checkpoint"), signedCheckpoint(t, issuedLedger(t, 7), key.signer, testOrigin, 7), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd("ledger", "prove", "--dir", forked, "--seq", "2"); code != 1 || !strings.Contains(errOut, "another history") {
		t.Errorf("another history: exit %d, stderr %q", code, errOut)
	}
	// A broken ledger.
	seg := filepath.Join(dir, "ledger-000001.jsonl")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, bytes.Replace(data, []byte(`"uid-0002"`), []byte(`"uid-0009"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd("ledger", "prove", "--dir", dir, "--seq", "1"); code != 1 || !strings.Contains(errOut, "hash mismatch") {
		t.Errorf("broken ledger: exit %d, stderr %q", code, errOut)
	}
}

// serverCheckpointKey is the public half of the checkpoint key a server made in its ledger
// directory (an Ed25519 PKCS#8 PEM), written as ledgerproof's PEM to a file.
func serverCheckpointKey(t *testing.T, ledgerDir string) string {
	t.Helper()
	block, _ := pem.Decode(readFile(t, filepath.Join(ledgerDir, "checkpoint-key.pem")))
	if block == nil {
		t.Fatal("checkpoint-key.pem holds no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ledgerproof.MarshalPublicKeyPEM(key.(crypto.Signer).Public())
	if err != nil {
		t.Fatal(err)
	}
	return writeTemp(t, "server-checkpoint.pub", pub)
}

// devClient is a signing client of the dev server at addr with the dev PKI in state; closed at
// the end of the test.
func devClient(t *testing.T, addr, state string) *signerclient.Client {
	t.Helper()
	client, err := signerclient.New(signerclient.Config{Address: addr, CAFile: filepath.Join(state, devpki.TLSCACert),
		CertFile: filepath.Join(state, devpki.ClientCert), KeyFile: filepath.Join(state, devpki.ClientKey), RPCTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// aliceCSR is a client certificate request of alice for the dev signer, object uid.
func aliceCSR(t *testing.T, uid string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	exp := int32(3600)
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "web", UID: types.UID(uid)},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: devpki.DefaultSigner, ExpirationSeconds: &exp, Username: "alice",
			Request: testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}),
			Usages:  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
	}
}

// TestLedgerProveOnline: against a real server that signed a certificate, checkpoint and prove
// (by serial, object UID and seq) give what verify-proof accepts with the server's key, and the
// offline commands agree on the server's ledger directory.
func TestLedgerProveOnline(t *testing.T) {
	cfg, state := servertest.DevConfig(t, devpki.Options{})
	srv := servertest.Start(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ledgerDir := cfg.Ledger.Dir
	client := devClient(t, srv.Addr, state)
	// Three certificates: the second one's record is proved, with a non-empty audit path.
	var (
		csr    *certificatesv1.CertificateSigningRequest
		issued signerclient.Issued
		seq    uint64
	)
	for i := 1; i <= 3; i++ {
		c := aliceCSR(t, fmt.Sprintf("6f1c0000-0000-4000-8000-00000000000%d", i))
		got, err := client.SignCSR(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			rep, err := ledger.Verify(ledgerDir)
			if err != nil {
				t.Fatal(err)
			}
			csr, issued, seq = c, got, rep.LastSeq
		}
	}
	rep, err := ledger.Verify(ledgerDir)
	if err != nil || rep.LastSeq < 3 {
		t.Fatalf("the server's ledger: %v, %+v", err, rep)
	}
	pub := serverCheckpointKey(t, ledgerDir)
	conn := []string{"--server", srv.Addr, "--dev-state-dir", state}

	// Poll until a checkpoint covers the record (one is signed within the interval).
	var signed string
	for deadline := time.Now().Add(20 * time.Second); ; {
		code, out, errOut := runCmd(append([]string{"ledger", "checkpoint", "--key", pub}, conn...)...)
		if code != 0 {
			t.Fatalf("checkpoint: exit %d, stderr %q", code, errOut)
		}
		if c, err := unverifiedCheckpoint([]byte(out)); err == nil && c.Size >= int64(rep.LastSeq) {
			signed = out
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint covers record %d: %q", rep.LastSeq, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	origin := firstLine([]byte(signed))
	if !strings.HasPrefix(origin, "signet-ledger/") {
		t.Errorf("origin %q, want the default signet-ledger/…", origin)
	}
	if code, out, _ := runCmd(append([]string{"ledger", "checkpoint"}, conn...)...); code != 0 || firstLine([]byte(out)) != origin || !strings.Contains(out, "\n\n— "+origin+" ") {
		t.Errorf("checkpoint without --key: exit %d, %q", code, out)
	}
	if code, out, errOut := runCmd(append([]string{"ledger", "checkpoint", "--key", newCheckpointKey(t, "ed25519").pubFile}, conn...)...); code != 1 || out != "" ||
		!strings.Contains(errOut, "the server's checkpoint does not verify: ") || !strings.Contains(errOut, "no signature by the trusted key") {
		t.Errorf("checkpoint with another key: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	for _, args := range [][]string{
		append([]string{"--serial", issued.Serial}, conn...),
		append([]string{"--uid", string(csr.UID)}, conn...),
		append([]string{"--seq", itoa(int64(seq))}, conn...),
		{"--dir", ledgerDir, "--serial", strings.ToUpper(issued.Serial)},
	} {
		code, out, errOut := runCmd(append([]string{"ledger", "prove"}, args...)...)
		if code != 0 {
			t.Fatalf("prove %v: exit %d, stderr %q", args, code, errOut)
		}
		if b := parseBundle(t, out); b.Index != int64(seq)-1 || len(b.Proof) == 0 {
			t.Errorf("prove %v: index %d with %d proof hashes, want %d and some", args, b.Index, len(b.Proof), seq-1)
		}
		code, vout, errOut := runIn([]byte(out), "ledger", "verify-proof", "--key", pub, "--origin", origin, "-")
		t.Logf("verify-proof of prove %v:\n%s", args, vout)
		if code != 0 || !strings.HasPrefix(vout, "inclusion proof OK: record "+itoa(int64(seq))+" ") ||
			!strings.Contains(vout, "  Serial:    "+issued.Serial+"\n") || !strings.Contains(vout, "  Object:    "+string(csr.UID)+"\n") {
			t.Errorf("verify-proof of prove %v: exit %d\nstdout %q\nstderr %q", args, code, vout, errOut)
		}
	}

	// The ledger on disk against the checkpoint the server keeps and the one fetched.
	saved := writeTemp(t, "saved.checkpoint", []byte(signed))
	code, out, errOut := runCmd("ledger", "audit", "--dir", ledgerDir, "--key", pub, "--origin", origin,
		"--checkpoint", filepath.Join(ledgerDir, "checkpoint"), "--checkpoint", saved)
	if code != 0 || !strings.HasPrefix(out, "ledger audit OK: ") {
		t.Errorf("audit of the server's ledger: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}

	// What the server cannot prove: refusals with a reason (exit 1).
	if code, _, errOut := runCmd(append([]string{"ledger", "prove", "--serial", "abcdef"}, conn...)...); code != 1 || !strings.Contains(errOut, "refused (NOT_FOUND)") {
		t.Errorf("prove of no record: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCmd(append([]string{"ledger", "prove", "--seq", "1", "--tree-size", "999999"}, conn...)...); code != 1 ||
		!strings.Contains(errOut, "refused (NOT_FOUND)") || !strings.Contains(errOut, "no signed checkpoint of size 999999") {
		t.Errorf("prove at an unknown size: exit %d, stderr %q", code, errOut)
	}
}

// TestLedgerProveCheckpointTrailingNULs: DIR/checkpoint ending in NUL bytes (which the
// server's CheckFile ignores) still gives a bundle, without them.
func TestLedgerProveCheckpointTrailingNULs(t *testing.T) {
	key := newCheckpointKey(t, "ed25519")
	dir := proveLedger(t, key.signer)
	cp := filepath.Join(dir, "checkpoint")
	signed := readFile(t, cp)
	if err := os.WriteFile(cp, append(bytes.Clone(signed), make([]byte, 64)...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("ledger", "prove", "--dir", dir, "--seq", "2")
	if code != 0 || errOut != "" {
		t.Fatalf("prove: exit %d, stderr %q", code, errOut)
	}
	if b := parseBundle(t, out); !bytes.Equal(b.SignedCheckpoint, signed) {
		t.Errorf("the bundle's checkpoint is %q, want %q", b.SignedCheckpoint, signed)
	}
	if code, vout, _ := runIn([]byte(out), "ledger", "verify-proof", "--key", key.pubFile, "-"); code != 0 {
		t.Errorf("verify-proof: exit %d, %q", code, vout)
	}
}

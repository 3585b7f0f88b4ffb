package server_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/ledgerproof"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/checkpoint"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
)

// checkpointVerifier is the verifier of the server's default checkpoint key (created in the
// ledger directory at the first start) and the origin derived from it.
func checkpointVerifier(t *testing.T, ledgerDir string) (string, note.Verifier) {
	t.Helper()
	key, err := keystore.Open(context.Background(), filepath.Join(ledgerDir, "checkpoint-key.pem"), keystore.Options{})
	if err != nil {
		t.Fatalf("the server's default checkpoint key: %v", err)
	}
	defer key.Close()
	pub, err := ledgerproof.MarshalPublicKeyPEM(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ledgerproof.ParsePublicKeyPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := os.ReadFile(filepath.Join(ledgerDir, checkpoint.FileName))
	if err != nil {
		t.Fatal(err)
	}
	origin, _, _ := strings.Cut(string(signed), "\n")
	v, err := ledgerproof.NewNoteVerifier(origin, parsed)
	if err != nil {
		t.Fatal(err)
	}
	return origin, v
}

func toHashes(t *testing.T, bs [][]byte) []tlog.Hash {
	t.Helper()
	hs, err := ledgerproof.ParseHashes(bs)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// TestCheckpointsAndProofs: the server signs checkpoints of its ledger (with the key it
// created in the ledger directory); an issued certificate's record is proved included in the
// latest checkpoint, and two checkpoints are proved consistent, with the ledgerproof verifier;
// a changed byte of the record fails the proof. After a clean stop, a ledger cut by its last
// record, or replaced by an older copy when a witnessed checkpoint is configured, is refused
// at start.
func TestCheckpointsAndProofs(t *testing.T) {
	t.Parallel()
	cfg, dir := devConfig(t)
	first, stop := runServer(t, cfg, dir)
	conn := first.dial(t, first.clientTLS(t, first.devClient(t)))
	signer := signetv1.NewSignerServiceClient(conn)
	ledgerClient := signetv1.NewLedgerServiceClient(conn)
	cert := signOne(t, signer)
	origin, verifier := checkpointVerifier(t, cfg.Ledger.Dir)

	// Wait for a checkpoint that covers the issuance (asynchronous: at most an interval).
	var cp ledgerproof.Checkpoint
	var signed []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := ledgerClient.GetCheckpoint(callContext(t), &signetv1.GetCheckpointRequest{})
		if err != nil {
			t.Fatal(err)
		}
		signed = resp.GetSignedCheckpoint()
		if cp, err = ledgerproof.OpenCheckpoint(signed, origin, verifier); err != nil {
			t.Fatalf("GetCheckpoint: %v", err)
		}
		if cp.Size >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint covers the issued certificate after 10 s")
		}
	}
	serial := hex.EncodeToString(cert.SerialNumber.Bytes())
	inc, err := ledgerClient.ProveInclusion(callContext(t), &signetv1.ProveInclusionRequest{SerialNumber: serial})
	if err != nil {
		t.Fatal(err)
	}
	b := ledgerproof.InclusionBundle{Index: int64(inc.GetSeq()) - 1, Leaf: inc.GetLeaf(), Proof: toHashes(t, inc.GetProof()), SignedCheckpoint: inc.GetSignedCheckpoint()}
	if _, err := b.Verify(origin, verifier); err != nil {
		t.Fatalf("inclusion proof of the issuance record: %v", err)
	}
	if !bytes.Contains(b.Leaf, []byte(`"serial":"`+serial+`"`)) {
		t.Errorf("proved leaf is not the issuance record of %s: %s", serial, b.Leaf)
	}
	b.Leaf = bytes.Replace(b.Leaf, []byte(`"issued"`), []byte(`"refused"`), 1)
	if _, err := b.Verify(origin, verifier); !errors.Is(err, ledgerproof.ErrNotIncluded) {
		t.Errorf("a changed record verified: %v", err)
	}

	signOne(t, signer)
	var newer ledgerproof.Checkpoint
	for deadline := time.Now().Add(10 * time.Second); newer.Size <= cp.Size; time.Sleep(20 * time.Millisecond) {
		resp, err := ledgerClient.ProveConsistency(callContext(t), &signetv1.ProveConsistencyRequest{OldSize: cp.Size})
		if err != nil {
			t.Fatal(err)
		}
		if newer, err = ledgerproof.OpenCheckpoint(resp.GetSignedCheckpoint(), origin, verifier); err != nil {
			t.Fatal(err)
		}
		if err := ledgerproof.VerifyConsistency(cp, newer, toHashes(t, resp.GetProof())); err != nil {
			t.Fatalf("consistency %d → %d: %v", cp.Size, newer.Size, err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no newer checkpoint after 10 s")
		}
	}
	stop() // a clean stop signs the last checkpoint

	// The last record cut off after the clean stop: refused at start.
	seg := filepath.Join(cfg.Ledger.Dir, "ledger-000001.jsonl")
	whole, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	records := bytes.TrimRight(whole, "\x00")
	lastLine := bytes.LastIndexByte(records[:len(records)-1], '\n') + 1
	cut := append(append([]byte(nil), records[:lastLine]...), make([]byte, len(whole)-lastLine)...)
	if err := os.WriteFile(seg, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, checkpoint.ErrBehind) || !strings.Contains(err.Error(), "removed from its end") {
		t.Fatalf("server.New on a ledger cut after its last checkpoint: %v, want ErrBehind", err)
	}
	if err := os.WriteFile(seg, whole, 0o600); err != nil {
		t.Fatal(err)
	}

	// The whole directory replaced by an older copy, which carries its older checkpoint: only
	// a checkpoint witnessed elsewhere can tell.
	witnessed := filepath.Join(t.TempDir(), "witnessed")
	latest, err := os.ReadFile(filepath.Join(cfg.Ledger.Dir, checkpoint.FileName))
	if err != nil || os.WriteFile(witnessed, latest, 0o600) != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Ledger.Dir, checkpoint.FileName), signed, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Verify(cfg.Ledger.Dir); err != nil {
		t.Fatalf("the older copy is a valid ledger on its own: %v", err)
	}
	cfg.Ledger.Checkpoint.WitnessedFile = witnessed
	_, err = server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, checkpoint.ErrBehind) || !strings.Contains(err.Error(), "witnessed") {
		t.Fatalf("server.New on an older copy of the ledger with a witnessed checkpoint: %v, want ErrBehind naming it", err)
	}
	if err := os.WriteFile(seg, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	again, _ := runServer(t, cfg, dir)
	if _, err := signetv1.NewSignerServiceClient(again.dial(t, again.clientTLS(t, again.devClient(t)))).
		SignCertificateSigningRequest(callContext(t), signRequest(testpki.CSR(t, testpki.Key(t, testpki.P256), nil), "after-restore")); err != nil {
		t.Fatalf("signing after the ledger was restored whole: %v", err)
	}
}

// TestCheckpointKeyInHardware: the checkpoint key can be any keystore backend's ECDSA P-256
// key: in SoftHSM2 (PKCS#11) and in a TPM (swtpm); the checkpoints verify with its public key.
func TestCheckpointKeyInHardware(t *testing.T) {
	tok := softhsmtest.New(t) // sets SOFTHSM2_CONF: not parallel
	tpm := swtpmtest.Start(t)
	for _, tc := range []struct{ name, uri string }{
		{"SoftHSM2", tok.URI("checkpoint-p256")},
		{"swtpm", tpm.URI("blob=" + filepath.Join(t.TempDir(), "checkpoint.tpmkey"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, uri, err := keystore.Generate(context.Background(), tc.uri, "P-256", keystore.Options{})
			if err != nil {
				t.Fatalf("creating the checkpoint key: %v", err)
			}
			pub := key.Public()
			if err := key.Close(); err != nil {
				t.Fatal(err)
			}
			s := startServer(t, func(c *config.Config) {
				c.Ledger.Checkpoint.Key, c.Ledger.Checkpoint.Origin = uri, "example.com/signet-ledger"
			})
			conn := s.dial(t, s.clientTLS(t, s.devClient(t)))
			signOne(t, signetv1.NewSignerServiceClient(conn))
			v, err := ledgerproof.NewNoteVerifier("example.com/signet-ledger", pub)
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				resp, err := signetv1.NewLedgerServiceClient(conn).GetCheckpoint(callContext(t), &signetv1.GetCheckpointRequest{})
				if err != nil {
					t.Fatal(err)
				}
				cp, err := ledgerproof.OpenCheckpoint(resp.GetSignedCheckpoint(), "example.com/signet-ledger", v)
				if err != nil {
					t.Fatalf("checkpoint signed in %s: %v", tc.name, err)
				}
				if cp.Size >= 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no checkpoint covers the issuance")
				}
			}
			if _, err := os.Stat(filepath.Join(s.dir, "ledger", "checkpoint-key.pem")); !os.IsNotExist(err) {
				t.Errorf("a default key file was created although a key is configured: %v", err)
			}
		})
	}
}

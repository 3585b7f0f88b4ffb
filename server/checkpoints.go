package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/pemfile"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/checkpoint"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/metrics"
)

// defaultCheckpointKey is the checkpoint key's file in the ledger directory when the
// configuration names none: an Ed25519 key created at the first start.
const defaultCheckpointKey = "checkpoint-key.pem"

// openCheckpoints opens the checkpoint key, refuses a ledger that does not extend its last
// checkpoint (or the witnessed one the configuration names), and starts signing checkpoints.
func (s *Server) openCheckpoints(ctx context.Context) error {
	cc := s.cfg.Ledger.Checkpoint
	origin, signer, verifier, err := s.openCheckpointKey(ctx)
	if err != nil {
		return err
	}
	tree := s.ledger.Tree()
	if err := checkpoint.CheckFile(tree, s.cfg.Ledger.Dir, origin, verifier); err != nil {
		return fmt.Errorf("opening ledger %s: %w; restore the ledger from a backup that holds every record its checkpoints cover", s.cfg.Ledger.Dir, err)
	}
	if cc.WitnessedFile != "" {
		signed, err := os.ReadFile(cc.WitnessedFile)
		if err != nil {
			return fmt.Errorf("reading ledger.checkpoint.witnessedFile: %w", err)
		}
		if err := checkpoint.Check(tree, signed, origin, verifier, "the witnessed checkpoint "+cc.WitnessedFile); err != nil {
			return fmt.Errorf("opening ledger %s: %w", s.cfg.Ledger.Dir, err)
		}
	}
	cp, err := checkpoint.New(tree, checkpoint.Options{
		Origin: origin, Signer: signer, Dir: s.cfg.Ledger.Dir,
		Interval: cc.Interval.Duration, Logger: s.log,
		Observe: func(size int64, lag time.Duration) { s.metrics.ObserveCheckpoint(size, lag) },
	})
	if err != nil {
		return err
	}
	s.checkpoints.Store(cp)
	_, size := cp.Latest()
	s.metrics.ObserveCheckpointSize(size)
	s.checkpointsStop, s.checkpointsDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.checkpointsDone)
		cp.Run(s.checkpointsStop)
	}()
	s.log.Info("ledger checkpoints", "origin", origin, "size", size)
	return nil
}

// openCheckpointKey opens the checkpoint key (created in the ledger directory on a first
// start when the configuration names none) and returns the checkpoints' origin, its signer and
// its verifier.
func (s *Server) openCheckpointKey(ctx context.Context) (string, note.Signer, note.Verifier, error) {
	cc := s.cfg.Ledger.Checkpoint
	uri := cc.Key
	if uri == "" {
		uri = filepath.Join(s.cfg.Ledger.Dir, defaultCheckpointKey)
		if err := ensureCheckpointKey(uri); err != nil {
			return "", nil, nil, err
		}
	}
	key, err := keystore.Open(ctx, uri, keystore.Options{AllowPINValue: s.cfg.Keys.AllowPINValue, Timeout: s.cfg.Keys.Timeout.Duration})
	if err != nil {
		return "", nil, nil, fmt.Errorf("opening the ledger's checkpoint key: %w", err)
	}
	s.checkpointKey = key
	origin := cc.Origin
	if origin == "" {
		if origin, err = defaultOrigin(key.Public()); err != nil {
			return "", nil, nil, err
		}
	}
	signer, err := ledgerproof.NewNoteSigner(origin, key)
	if err != nil {
		return "", nil, nil, fmt.Errorf("ledger checkpoint key: %w", err)
	}
	verifier, err := ledgerproof.NewNoteVerifier(origin, key.Public())
	if err != nil {
		return "", nil, nil, fmt.Errorf("ledger checkpoint key: %w", err)
	}
	pub, _ := ledgerproof.MarshalPublicKeyPEM(key.Public())
	s.log.Info("ledger checkpoint key", "origin", origin, "key", keystore.Redact(uri), "public_key", string(pub))
	return origin, signer, verifier, nil
}

// ledgerProofs serves the proof RPCs (signerapi.Proofs): the checkpoints of one, the tree and
// lines of the other.
type ledgerProofs struct {
	*checkpoint.Checkpointer
	*ledger.Ledger
}

// ledgerState is signet_server_ledger_state's state for the ledger's Err.
func ledgerState(err error) string {
	switch {
	case err == nil:
		return metrics.LedgerOK
	case errors.Is(err, ledger.ErrRestartRequired):
		return metrics.LedgerRestartRequired
	default:
		return metrics.LedgerUnavailable
	}
}

// closeCheckpoints signs the last checkpoint and releases the key.
func (s *Server) closeCheckpoints() {
	if s.checkpointsStop != nil {
		close(s.checkpointsStop)
		<-s.checkpointsDone
		s.checkpointsStop = nil
	}
	if s.checkpointKey != nil {
		if err := s.checkpointKey.Close(); err != nil {
			s.log.Warn("closing the checkpoint key", "error", err.Error())
		}
		s.checkpointKey = nil
	}
}

// ensureCheckpointKey creates an Ed25519 key at path (PKCS#8 PEM, mode 0600, synced with its
// folder) unless a file is there.
func ensureCheckpointKey(path string) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("creating the ledger's checkpoint key: %w", err)
	}
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(priv)
	if err == nil {
		err = atomicfile.Write(path, keyPEM, 0o600)
	}
	if err != nil {
		return fmt.Errorf("creating the ledger's checkpoint key: %w", err)
	}
	return nil
}

// defaultOrigin is "signet-ledger/" and the first 16 hex digits of the SHA-256 of pub's PKIX
// encoding.
func defaultOrigin(pub any) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("ledger checkpoint key: %w", err)
	}
	sum := sha256.Sum256(der)
	return "signet-ledger/" + hex.EncodeToString(sum[:8]), nil
}

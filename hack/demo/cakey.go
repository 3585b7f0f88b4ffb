package main

import (
	"context"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/signet-pki/signet/internal/cacert"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/softhsm"
	"github.com/signet-pki/signet/internal/swtpm"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keyerr"
)

// Where the demo signer's CA key lives (--key).
const (
	keyFile   = "file"   // the PEM file signet-server --dev writes
	keyPKCS11 = "pkcs11" // made inside a SoftHSM2 token
	keyTPM    = "tpm"    // made inside a TPM 2.0 (swtpm, a separate process)
)

const (
	tokenLabel  = "signet-demo"
	objectLabel = "demo-ca"
	caLifetime  = 365 * 24 * time.Hour
)

// caKey is the demo signer's CA key: its URI in the server configuration, where it lives,
// and what must be stopped after the server (swtpm).
type caKey struct {
	uri     string
	place   string // "file …", "inside …"
	note    string // how it is protected
	device  bool   // an HSM or TPM key: the summary shows its URI
	cleanup func()
}

// fileKey is the key of plain `signet-server --dev`: a PEM file in its state folder.
func fileKey(state string) *caKey {
	path := filepath.Join(state, devpki.SignerCAKey)
	return &caKey{uri: path, place: "file " + path, note: "unencrypted PEM made by signet-server --dev; development only", cleanup: func() {}}
}

// summary says where the key lives, with its URI for a device key (a PIN never shows: the
// URI has pin-source, and Redact would hide a pin-value).
func (ck *caKey) summary() string {
	if !ck.device {
		return ck.place + " (" + ck.note + ")"
	}
	return ck.place + " (" + keystore.Redact(ck.uri) + "; " + ck.note + ")"
}

// deviceKey prepares the dev PKI in state as `signet-server --dev` would (TLS CA, server and
// client certificates, config), then replaces the signer's CA: a P-256 key generated inside a
// SoftHSM2 token (kind pkcs11) or a swtpm TPM (kind tpm), never on disk, and a self-signed root
// made with it. The config's signer then names the key by its URI and the file software key is
// deleted. Call cleanup after the server has stopped.
func deviceKey(ctx context.Context, kind, dir, state, addr string) (*caKey, error) {
	cfgPath, err := devpki.Ensure(devpki.Options{Dir: state, SignerName: signerName, PodIdentitySigner: devpki.DefaultPodIdentitySigner, Address: addr})
	if err != nil {
		return nil, err
	}
	var ck *caKey
	switch kind {
	case keyPKCS11:
		sdir := filepath.Join(dir, "softhsm")
		if err = os.MkdirAll(sdir, 0o700); err == nil {
			ck, err = softHSMToken(sdir)
		}
	case keyTPM:
		ck, err = startSWTPM(dir)
	default:
		err = fmt.Errorf("unknown --key %q: want %s, %s or %s", kind, keyFile, keyPKCS11, keyTPM)
	}
	if err != nil {
		return nil, err
	}
	err = makeRoot(ctx, ck, state, kind)
	if err == nil {
		err = useKey(cfgPath, ck.uri)
	}
	if err == nil {
		if err = os.Remove(filepath.Join(state, devpki.SignerCAKey)); err != nil {
			err = fmt.Errorf("removing the unused file CA key: %w", err)
		}
	}
	if err != nil {
		ck.cleanup()
		return nil, err
	}
	return ck, nil
}

// makeRoot generates the key at ck.uri (which becomes the key's canonical URI), makes the
// signer's self-signed root with it and writes the root over the dev signer CA certificate.
// The key is closed before returning: swtpm serves one connection at a time, and the server
// opens the key next.
func makeRoot(ctx context.Context, ck *caKey, state, kind string) error {
	key, uri, err := keystore.Generate(ctx, ck.uri, keyerr.P256, keystore.Options{})
	if err != nil {
		return fmt.Errorf("generating the CA key inside the %s: %w", deviceName(kind), err)
	}
	ck.uri = uri
	root, err := cacert.SelfSigned(key, cacert.Options{
		Subject: pkix.Name{
			CommonName:   fmt.Sprintf("Signet demo signer CA (%s) with its key in a %s", signerName, deviceName(kind)),
			Organization: []string{"Signet development"},
		},
		Lifetime: caLifetime,
	})
	if cerr := key.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the new CA key: %w", cerr)
	}
	if err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})
	if err := os.WriteFile(filepath.Join(state, devpki.SignerCACert), certPEM, 0o644); err != nil {
		return fmt.Errorf("writing the signer CA certificate: %w", err)
	}
	return nil
}

// useKey rewrites the server configuration at path so that the demo signer's CA key is uri
// (its certificate stays the dev signer CA certificate file, now the device key's root).
func useKey(path, uri string) error {
	header := "# Written by hack/demo: signet-server --dev's PKI, with the signer's CA key inside a device.\n"
	return editServerConfig(path, header, func(cfg map[string]any) error {
		signers, _ := cfg["signers"].([]any)
		for _, s := range signers {
			if m, ok := s.(map[string]any); ok && m["name"] == signerName {
				m["key"], m["certificate"] = uri, devpki.SignerCACert
				return nil
			}
		}
		return fmt.Errorf("no signer %s", signerName)
	})
}

// rootNote is what the verification line adds about the root: for a device key, that the
// demo made it with that key.
func (ck *caKey) rootNote() string {
	if !ck.device {
		return ""
	}
	return ", the root made with the key " + ck.place
}

// softHSMToken initializes a fresh SoftHSM2 token in dir (internal/softhsm), its PIN a
// random one in a 0600 file, and points this process and its children (signet-server) at it
// with SOFTHSM2_CONF.
func softHSMToken(dir string) (*caKey, error) {
	tok, err := softhsm.Init(dir, tokenLabel)
	if err != nil {
		return nil, fmt.Errorf("making the SoftHSM2 token: %w", err)
	}
	if err := os.Setenv("SOFTHSM2_CONF", tok.ConfPath); err != nil {
		return nil, fmt.Errorf("setting SOFTHSM2_CONF: %w", err)
	}
	return &caKey{
		uri:     tok.URI(objectLabel),
		place:   fmt.Sprintf("inside SoftHSM2 token %q as object %q", tokenLabel, objectLabel),
		note:    "PIN redacted: the server reads it from a 0600 file",
		device:  true,
		cleanup: func() {},
	}, nil
}

// startSWTPM starts a swtpm TPM 2.0 with fresh state in dir/tpm as a separate process and
// waits until its socket answers. The key is a blob sealed by the TPM's storage root key.
func startSWTPM(dir string) (*caKey, error) {
	tpmDir := filepath.Join(dir, "tpm")
	state := filepath.Join(tpmDir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("creating the swtpm state folder: %w", err)
	}
	tpm, err := swtpm.Start(state)
	if err != nil {
		return nil, err
	}
	blob := filepath.Join(tpmDir, objectLabel+".tpmkey")
	return &caKey{
		uri:     tpm.URI("blob=" + blob),
		place:   fmt.Sprintf("inside a TPM 2.0 served by swtpm, a separate process with pid %d", tpm.PID()),
		note:    "the blob file holds it sealed by the TPM's storage root key: only that TPM can load it",
		device:  true,
		cleanup: tpm.Close,
	}, nil
}

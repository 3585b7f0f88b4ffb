package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/youmark/pkcs8"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/pemfile"
)

// Ed25519 is the name of an Ed25519 key: file keys only (the devices make ECDSA and RSA).
const Ed25519 = "Ed25519"

// fileAlgorithms are the algorithms of the file keys keys create makes.
var fileAlgorithms = []string{keyerr.P256, keyerr.P384, keyerr.RSA2048, keyerr.RSA3072, keyerr.RSA4096, Ed25519}

// fileKeyEncryption is how keys create encrypts a file key: PBES2 with PBKDF2-HMAC-SHA256
// (600,000 iterations, OWASP's 2023 figure; a 16-byte salt) and AES-256-CBC, what
// openssl pkcs8 -topk8 -v2 aes-256-cbc writes and reads, and what keystore/pemfile opens.
var fileKeyEncryption = &pkcs8.Opts{
	Cipher:  pkcs8.AES256CBC,
	KDFOpts: pkcs8.PBKDF2Opts{SaltSize: 16, IterationCount: 600_000, HMACHash: crypto.SHA256},
}

// fileKeyRequest is a keys create for a file: where, with which passphrase file.
type fileKeyRequest struct {
	path, passFile string
}

// fileKeyTarget returns the file a keys create --uri names, with its passphrase file: the
// passphrase-file attribute of a file: URI or --passphrase-file (the same file if both).
// ok is false for a device URI (pkcs11:, tpm:); then passFlag must be empty.
func fileKeyTarget(uri, passFlag string) (req fileKeyRequest, ok bool, err error) {
	path, isFile := keystore.FilePath(uri)
	if !isFile {
		if scheme, _, _ := strings.Cut(uri, ":"); scheme == "file" {
			// A malformed file URI: let keystore say what is wrong with it.
			_, err := keystore.Open(context.Background(), uri, keystore.Options{})
			return req, false, fmt.Errorf("--uri: %v", err)
		}
		if passFlag != "" {
			return req, false, errors.New("--passphrase-file is for file keys: an HSM or TPM key has no passphrase (a pkcs11: URI takes pin-source=)")
		}
		return req, false, nil
	}
	var inURI string
	if strings.HasPrefix(uri, "file:") {
		u, err := url.Parse(uri)
		if err != nil {
			return req, true, fmt.Errorf("--uri: %v", err)
		}
		if v := u.Query()["passphrase-file"]; len(v) > 1 {
			return req, true, errors.New("--uri: passphrase-file is given twice")
		} else if len(v) == 1 {
			inURI = v[0]
		}
	}
	switch {
	case passFlag == "" && inURI == "":
		return req, true, errors.New("--passphrase-file: required for a file key: keys create writes only encrypted keys; name the file (mode 0600) that holds the passphrase, as the server's key URI names it (file:///path/ca.key?passphrase-file=/path/ca.pass)")
	case passFlag != "" && inURI != "" && filepath.Clean(passFlag) != filepath.Clean(inURI):
		return req, true, fmt.Errorf("--passphrase-file %s and the URI's passphrase-file=%s differ: give one", passFlag, inURI)
	case passFlag == "":
		passFlag = inURI
	}
	if path == "" {
		return req, true, errors.New("--uri: the file URI names no path")
	}
	if req.path, err = filepath.Abs(path); err != nil {
		return req, true, fmt.Errorf("--uri: %v", err)
	}
	if req.passFile, err = filepath.Abs(passFlag); err != nil {
		return req, true, fmt.Errorf("--passphrase-file: %v", err)
	}
	return req, true, nil
}

// uri is the key URI the server opens the file key with: file://PATH?passphrase-file=FILE,
// both absolute, escaped as needed.
func (r fileKeyRequest) uri() string {
	u := url.URL{Scheme: "file", Path: r.path,
		RawQuery: "passphrase-file=" + strings.ReplaceAll(url.QueryEscape(r.passFile), "%2F", "/")}
	return u.String()
}

// createFileKey generates an alg key, encrypts it as an "ENCRYPTED PRIVATE KEY" (PKCS#8,
// fileKeyEncryption) with pass (read from r.passFile by readPassphrase) and writes it to
// r.path, mode 0600, refusing an existing file. It then opens the file as the server does
// (keystore.Open with the URI it returns), checks the key and a signature, and returns the
// open key; a file that fails the check is removed.
func createFileKey(ctx context.Context, r fileKeyRequest, alg string, pass []byte) (keystore.Key, string, error) {
	key, err := newFileKey(alg)
	if err != nil {
		return nil, "", err
	}
	der, err := pkcs8.MarshalPrivateKey(key, pass, fileKeyEncryption)
	if err != nil {
		return nil, "", fmt.Errorf("encrypting the %s key: %w", alg, err)
	}
	if err := writeNewFile(r.path, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der})); err != nil {
		return nil, "", err
	}
	uri := r.uri()
	opened, err := keystore.Open(ctx, uri, keystore.Options{})
	if err == nil {
		if err = sameKey(opened, key); err != nil {
			_ = opened.Close()
		}
	}
	if err != nil {
		_ = os.Remove(r.path) // written by us a moment ago, and of no use
		return nil, "", fmt.Errorf("checking the new key file %s as the server opens it (removed): %w", r.path, err)
	}
	return opened, uri, nil
}

// readPassphrase reads a passphrase file as keystore/pemfile does: readable by its owner only,
// trailing newline ignored, not empty. The passphrase never appears in an error.
func readPassphrase(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--passphrase-file: %w", err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return nil, fmt.Errorf("--passphrase-file: %w: %s has mode %#o; make it readable by its owner only (chmod 600 %s)", pemfile.ErrKeyFileMode, path, mode, path)
	}
	pass, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--passphrase-file: %w", err)
	}
	pass = bytes.TrimRight(pass, "\r\n")
	if len(pass) == 0 {
		return nil, fmt.Errorf("--passphrase-file: %s is empty", path)
	}
	return pass, nil
}

// newFileKey generates a key of alg, one of fileAlgorithms.
func newFileKey(alg string) (crypto.Signer, error) {
	var (
		key crypto.Signer
		err error
	)
	switch alg {
	case keyerr.P256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case keyerr.P384:
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case keyerr.RSA2048:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case keyerr.RSA3072:
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case keyerr.RSA4096:
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	case Ed25519:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("--algorithm %q: a file key is one of %s", alg, strings.Join(fileAlgorithms, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("generating %s key: %w", alg, err)
	}
	return key, nil
}

// writeNewFile writes data to a new file path, mode 0600; an existing file (or link) is
// refused and left as it is. A failed write removes the file.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("refusing to overwrite %s: it exists (remove it first if it is no key you need)", path)
	}
	if err != nil {
		return fmt.Errorf("creating key file: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("writing key file %s: %w", path, err)
	}
	return nil
}

// sameKey checks that opened is key: the same public key, and a signature by opened that
// key's public key verifies.
func sameKey(opened keystore.Key, key crypto.Signer) error {
	pub, ok := opened.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return errors.New("it holds another key than the one generated")
	}
	msg := []byte("signetctl keys create: file key check")
	digest := sha256.Sum256(msg)
	var (
		sig []byte
		err error
	)
	switch k := key.Public().(type) {
	case ed25519.PublicKey:
		if sig, err = opened.Sign(rand.Reader, msg, crypto.Hash(0)); err == nil && !ed25519.Verify(k, msg, sig) {
			err = errors.New("its signature does not verify")
		}
	case *ecdsa.PublicKey:
		if sig, err = opened.Sign(rand.Reader, digest[:], crypto.SHA256); err == nil && !ecdsa.VerifyASN1(k, digest[:], sig) {
			err = errors.New("its signature does not verify")
		}
	case *rsa.PublicKey:
		if sig, err = opened.Sign(rand.Reader, digest[:], crypto.SHA256); err == nil {
			err = rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig)
		}
	}
	return err
}

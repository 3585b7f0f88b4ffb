package tpm

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// Options are the settings of Open, Generate and List that a URI does not carry.
type Options struct {
	// Transport, when set, is used instead of the device or socket the URI names (tests: the
	// in-process simulator). Each Open calls it once, and the Key closes what it returned.
	Transport func() (transport.TPMCloser, error)
}

// Key is a signing key inside a TPM. It implements crypto.Signer and Close; it is safe for
// concurrent use, and its TPM commands are serialized on its own connection to the TPM.
type Key struct {
	loc  location
	info keyInfo

	mu     sync.Mutex
	tpm    transport.TPMCloser // nil once closed
	blob   *keyFile            // the key file of a blob= key; nil for a persistent key
	handle tpm2.TPMHandle      // the persistent handle, or the transient one a blob is loaded at
	name   tpm2.TPM2BName      // the key's TPM name, the same at either handle
	loaded bool                // a blob key is loaded at handle
}

// errNoKey is returned by Open, Generate and List for a URI that names a TPM but no key.
var errNoKey = errors.New("the URI names no key (want handle= or blob=)")

// Open loads the key named by uri (see the package doc for the grammar): for handle=, it
// reads the persistent key's public area; for blob=, it reads the key file, creates the
// storage root key, loads the blob under it and flushes the storage root key, keeping the key
// loaded until Close. Errors name the part of the URI at fault; failing to reach the TPM wraps
// keyerr.ErrUnavailable.
func Open(ctx context.Context, uri string, opts Options) (*Key, error) {
	loc, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	var kf *keyFile
	switch {
	case loc.blob != "":
		if kf, err = readKeyFile(loc.blob); err != nil {
			return nil, fmt.Errorf("opening key %s: %w", uri, err)
		}
	case loc.handle == 0:
		return nil, fmt.Errorf("opening key %s: %w", uri, errNoKey)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("opening key %s: %w", uri, err)
	}
	t, err := openTransport(loc, opts)
	if err != nil {
		return nil, fmt.Errorf("opening key %s: %w", uri, err)
	}
	k := &Key{loc: loc, tpm: t, blob: kf, handle: loc.handle}
	if err := k.open(); err != nil {
		_ = t.Close()
		return nil, fmt.Errorf("opening key %s: %w", uri, err)
	}
	return k, nil
}

// open reads a persistent key's public area, or checks and loads a blob.
func (k *Key) open() error {
	if k.blob == nil {
		info, name, err := readPersistent(k.tpm, k.loc)
		if err != nil {
			return err
		}
		k.info, k.name = info, name
		return nil
	}
	pub, err := k.blob.public.Contents()
	if err != nil {
		return fmt.Errorf("%s: %w", k.loc.keyName(), err)
	}
	if k.info, err = inspect(pub); err != nil {
		return fmt.Errorf("%s: %w", k.loc.keyName(), err)
	}
	return k.loadBlob()
}

// readPersistent reads the public area of the persistent key at loc's handle and checks
// that it is a signing key this backend supports.
func readPersistent(t transport.TPM, loc location) (keyInfo, tpm2.TPM2BName, error) {
	rsp, err := tpm2.ReadPublic{ObjectHandle: loc.handle}.Execute(t)
	if isHandleGone(err) {
		return keyInfo{}, tpm2.TPM2BName{}, fmt.Errorf("%s: no key at this handle", loc.keyName())
	}
	if err != nil {
		return keyInfo{}, tpm2.TPM2BName{}, tpmError(fmt.Sprintf("reading the key at %s on %s", loc.keyName(), loc.tpmName()), err)
	}
	pub, err := rsp.OutPublic.Contents()
	if err != nil {
		return keyInfo{}, tpm2.TPM2BName{}, fmt.Errorf("%s: reading its public area: %w", loc.keyName(), err)
	}
	info, err := inspect(pub)
	if err != nil {
		return keyInfo{}, tpm2.TPM2BName{}, fmt.Errorf("%s: %w", loc.keyName(), err)
	}
	return info, rsp.Name, nil
}

// loadBlob loads the blob under its parent and records its transient handle. Called with
// k.mu held (or before k is shared).
func (k *Key) loadBlob() error {
	parent, flush, err := blobParent(k.tpm, k.blob.parent)
	if err != nil {
		return err
	}
	defer flush()
	rsp, err := tpm2.Load{ParentHandle: parent, InPrivate: k.blob.private, InPublic: k.blob.public}.Execute(k.tpm)
	if err != nil {
		return loadError(k.loc, err)
	}
	k.handle, k.name, k.loaded = rsp.ObjectHandle, rsp.Name, true
	return nil
}

// loadError explains why TPM2_Load refused loc's blob.
func loadError(loc location, err error) error {
	switch {
	case isUnavailable(err):
		return tpmError("loading the key of "+loc.keyName(), err)
	case errors.Is(err, tpm2.TPMRCObjectMemory):
		// Unavailable, not final: while a key is re-opened after the TPM restarted, the old
		// and the new opening of the same key can hold a slot each for a moment, and the load
		// succeeds once one is flushed. When it is too many keys for good, the message says so
		// at every retry.
		return fmt.Errorf("loading the key of %s: %w: %w", loc.keyName(), keyerr.ErrUnavailable, errNoRoom(err))
	default:
		return fmt.Errorf("%s: the TPM refuses the blob (made on another TPM, or before the TPM was cleared?): %w", loc.keyName(), err)
	}
}

// errNoRoom explains TPM_RC_OBJECT_MEMORY: without a resource manager (a swtpm socket, or
// /dev/tpm0) a TPM holds only a few loaded objects, and each open blob key keeps one.
func errNoRoom(err error) error {
	return fmt.Errorf("the TPM has no room for another loaded object; close other blob keys, or use the kernel's resource manager (device=/dev/tpmrm0), which swaps them: %w", err)
}

// blobParent returns the handle to load a blob under: a new storage root key for the owner
// hierarchy (flush releases it), or a persistent parent as it is.
func blobParent(t transport.TPM, parent tpm2.TPMHandle) (tpm2.NamedHandle, func(), error) {
	if parent != tpm2.TPMRHOwner {
		rsp, err := tpm2.ReadPublic{ObjectHandle: parent}.Execute(t)
		if err != nil {
			return tpm2.NamedHandle{}, nil, tpmError(fmt.Sprintf("reading the blob's parent key 0x%08x", uint32(parent)), err)
		}
		return tpm2.NamedHandle{Handle: parent, Name: rsp.Name}, func() {}, nil
	}
	return createSRK(t)
}

// createSRK creates the storage root key (see srkTemplate) as a transient object; flush
// releases it.
func createSRK(t transport.TPM) (tpm2.NamedHandle, func(), error) {
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.TPMRHOwner,
		InPublic:      tpm2.New2B(srkTemplate),
	}.Execute(t)
	switch {
	case errors.Is(err, tpm2.TPMRCObjectMemory):
		return tpm2.NamedHandle{}, nil, fmt.Errorf("creating the storage root key: %w", errNoRoom(err))
	case errors.Is(err, tpm2.TPMRCBadAuth) || errors.Is(err, tpm2.TPMRCAuthFail):
		return tpm2.NamedHandle{}, nil, fmt.Errorf("creating the storage root key: the owner hierarchy has a password, and this backend uses the empty one: %w", err)
	case err != nil:
		return tpm2.NamedHandle{}, nil, tpmError("creating the storage root key", err)
	}
	h := tpm2.NamedHandle{Handle: rsp.ObjectHandle, Name: rsp.Name}
	return h, func() { _, _ = tpm2.FlushContext{FlushHandle: h.Handle}.Execute(t) }, nil
}

// readKeyFile reads and parses a blob file. Like a PEM CA key, a blob that group or others
// may access is refused: the key has no password, so whoever can read the blob and reach the
// TPM can sign with it.
func readKeyFile(path string) (*keyFile, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob=%s: no such file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("blob=%s: %w", path, err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return nil, fmt.Errorf("blob=%s: the key file has mode %#o; make it readable by its owner only (chmod 600 %s)", path, mode, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("blob=%s: %w", path, err)
	}
	kf, err := parseKeyFile(data)
	if err != nil {
		return nil, fmt.Errorf("blob=%s: %w", path, err)
	}
	return &kf, nil
}

// Public returns the key's public key: *ecdsa.PublicKey or *rsa.PublicKey.
func (k *Key) Public() crypto.PublicKey { return k.info.public }

// Algorithm returns the key's algorithm name (keyerr.P256, P384, RSA2048 or RSA3072).
func (k *Key) Algorithm() string { return k.info.algorithm }

// Handle returns the persistent handle of a handle= key, and 0 for a blob= key.
func (k *Key) Handle() uint32 { return uint32(k.loc.handle) }

// URI returns the key's canonical URI.
func (k *Key) URI() string { return k.loc.String() }

// Close flushes a blob key from the TPM (when the object at its handle is still this key)
// and closes the connection to the TPM. The key is unusable afterwards; Close is idempotent.
func (k *Key) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tpm == nil {
		return nil
	}
	if k.blob != nil && k.loaded {
		// After a TPM restart the handle may hold another client's object: flush only ours.
		if rsp, err := (tpm2.ReadPublic{ObjectHandle: k.handle}).Execute(k.tpm); err == nil && string(rsp.Name.Buffer) == string(k.name.Buffer) {
			_, _ = tpm2.FlushContext{FlushHandle: k.handle}.Execute(k.tpm)
		}
		k.loaded = false
	}
	err := k.tpm.Close()
	k.tpm = nil
	if err != nil {
		return fmt.Errorf("closing the TPM of %s: %w", k.loc, err)
	}
	return nil
}

// errClosed is returned by Sign on a closed key.
var errClosed = fmt.Errorf("%w: the key is closed", keyerr.ErrUnavailable)

// Sign signs digest, which must be the output of opts.HashFunc() (SHA-256, SHA-384 or
// SHA-512), with TPM2_Sign: ECDSA for an ECC key (the signature ASN.1 DER encoded), RSASSA
// PKCS #1 v1.5 or, when opts is *rsa.PSSOptions, RSAPSS for an RSA key. The TPM chooses the
// PSS salt length (the hash's length on the simulator and swtpm); a signature whose salt
// length is not the one opts asks for is refused with an error saying so. rand is unused: the
// TPM has its own. Every signature is verified with the public key before it is returned.
//
// A blob key whose transient handle the TPM lost (it restarted) is loaded again and the
// signature retried once. Failures of the device wrap keyerr.ErrUnavailable.
func (k *Key) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	req, err := k.request(digest, opts)
	if err != nil {
		return nil, fmt.Errorf("signing with %s: %w", k.loc, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	sig, err := k.signLocked(digest, req)
	if err != nil {
		return nil, fmt.Errorf("signing with %s: %w", k.loc, err)
	}
	return sig, nil
}

// signLocked runs TPM2_Sign, reloading a lost blob key once. Called with k.mu held.
func (k *Key) signLocked(digest []byte, req signRequest) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		if k.tpm == nil {
			return nil, errClosed
		}
		retry := k.blob != nil && attempt == 0
		if k.blob != nil && !k.loaded {
			if err := k.loadBlob(); err != nil {
				return nil, err
			}
		}
		rsp, err := tpm2.Sign{
			KeyHandle:  tpm2.NamedHandle{Handle: k.handle, Name: k.name},
			Digest:     tpm2.TPM2BDigest{Buffer: digest},
			InScheme:   req.scheme,
			Validation: tpm2.TPMTTKHashCheck{Tag: tpm2.TPMSTHashCheck, Hierarchy: tpm2.TPMRHNull},
		}.Execute(k.tpm)
		switch {
		case isHandleGone(err) && retry:
			k.loaded = false // the TPM restarted and dropped the loaded blob
			continue
		case isHandleGone(err):
			return nil, fmt.Errorf("%w: the key is no longer at %s (the TPM restarted or the key was evicted): %w", keyerr.ErrUnavailable, k.loc.keyName(), err)
		case err != nil:
			return nil, tpmError("TPM2_Sign", err)
		}
		sig, err := k.finish(rsp.Signature, digest, req)
		var mismatch *verifyError
		if errors.As(err, &mismatch) && retry {
			// The object at our transient handle is not our key: after a TPM restart another
			// client loaded something there. It is not ours to flush; load ours again.
			k.loaded = false
			continue
		}
		return sig, err
	}
}

package tpm

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// Entry is a key List found.
type Entry struct {
	// URI is the key's canonical URI, which Open accepts.
	URI string
	// Handle is the persistent handle of a handle= key; 0 for a blob= key.
	Handle uint32
	// Algorithm is keyerr.P256, P384, RSA2048 or RSA3072.
	Algorithm string
	// Public is the key's public key: *ecdsa.PublicKey or *rsa.PublicKey.
	Public crypto.PublicKey
}

// Generate creates a signing key of algorithm (keyerr.P256 when "", P384, RSA2048 or
// RSA3072) inside the TPM, under the storage root key, and returns it open with its canonical
// URI. For a blob= URI it writes the key file (mode 0600), refusing to overwrite an existing
// file; for a handle= URI it makes the key persistent at that handle (owner range
// 0x81000000–0x817FFFFF), refusing a handle that is already taken. Errors name the algorithm
// when the TPM cannot make such a key.
func Generate(ctx context.Context, uri string, algorithm string, opts Options) (*Key, string, error) {
	loc, err := parseURI(uri)
	if err != nil {
		return nil, "", err
	}
	loc = loc.absolute()
	fail := func(err error) (*Key, string, error) {
		return nil, "", fmt.Errorf("generating key %s: %w", uri, err)
	}
	template, err := keyTemplate(algorithm)
	if err != nil {
		return fail(err)
	}
	if err := checkTarget(loc); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	t, err := openTransport(loc, opts)
	if err != nil {
		return fail(err)
	}
	k := &Key{loc: loc, tpm: t, handle: loc.handle}
	if err := k.generate(template, algorithm); err != nil {
		_ = k.Close()
		return fail(err)
	}
	return k, loc.String(), nil
}

// checkTarget refuses a URI that names no key, a handle outside the owner's range, and a
// blob file that exists or whose directory does not, before the TPM spends time on a key.
func checkTarget(loc location) error {
	switch {
	case loc.blob != "":
		if _, err := os.Lstat(loc.blob); err == nil {
			return fmt.Errorf("blob=%s: the file exists; refusing to overwrite it", loc.blob)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blob=%s: %w", loc.blob, err)
		}
		if info, err := os.Stat(filepath.Dir(loc.blob)); err != nil || !info.IsDir() {
			return fmt.Errorf("blob=%s: no such directory", loc.blob)
		}
	case loc.handle == 0:
		return errNoKey
	case loc.handle > lastOwnerPersistent:
		return fmt.Errorf("%s: keys are made in the owner's range, 0x81000000 to 0x817FFFFF", loc.keyName())
	}
	return nil
}

// generate creates the key under the storage root key and loads it, then writes the blob or
// makes it persistent. The storage root key is flushed on return.
func (k *Key) generate(template tpm2.TPMTPublic, algorithm string) error {
	if k.loc.handle != 0 {
		_, err := tpm2.ReadPublic{ObjectHandle: k.loc.handle}.Execute(k.tpm)
		switch {
		case err == nil:
			return fmt.Errorf("%s: the handle holds a key already; refusing to replace it", k.loc.keyName())
		case !isHandleGone(err):
			return tpmError(fmt.Sprintf("reading %s on %s", k.loc.keyName(), k.loc.tpmName()), err)
		}
	}
	srk, flush, err := createSRK(k.tpm)
	if err != nil {
		return err
	}
	defer flush()
	created, err := tpm2.Create{ParentHandle: srk, InPublic: tpm2.New2B(template)}.Execute(k.tpm)
	switch {
	case isUnavailable(err):
		return tpmError(fmt.Sprintf("creating the %s key", algorithmName(algorithm)), err)
	case errors.Is(err, tpm2.TPMRCObjectMemory):
		return fmt.Errorf("creating the %s key: %w", algorithmName(algorithm), errNoRoom(err))
	case err != nil:
		return fmt.Errorf("creating the %s key: the TPM cannot make one: %w", algorithmName(algorithm), err)
	}
	pub, err := created.OutPublic.Contents()
	if err != nil {
		return fmt.Errorf("reading the new key's public area: %w", err)
	}
	if k.info, err = inspect(pub); err != nil {
		return fmt.Errorf("the new key: %w", err)
	}
	loaded, err := tpm2.Load{ParentHandle: srk, InPrivate: created.OutPrivate, InPublic: created.OutPublic}.Execute(k.tpm)
	if err != nil {
		return loadError(k.loc, err)
	}
	k.handle, k.name = loaded.ObjectHandle, loaded.Name
	if k.loc.blob != "" {
		k.blob = &keyFile{parent: tpm2.TPMRHOwner, emptyAuth: true, public: created.OutPublic, private: created.OutPrivate}
		k.loaded = true // Close flushes it if writing the file fails
		return writeKeyFile(k.loc.blob, *k.blob)
	}
	_, err = tpm2.EvictControl{
		Auth:             tpm2.TPMRHOwner,
		ObjectHandle:     tpm2.NamedHandle{Handle: loaded.ObjectHandle, Name: loaded.Name},
		PersistentHandle: k.loc.handle,
	}.Execute(k.tpm)
	_, _ = tpm2.FlushContext{FlushHandle: loaded.ObjectHandle}.Execute(k.tpm)
	switch {
	case errors.Is(err, tpm2.TPMRCNVDefined):
		return fmt.Errorf("%s: the handle holds a key already; refusing to replace it", k.loc.keyName())
	case err != nil:
		return tpmError("making the key persistent at "+k.loc.keyName(), err)
	}
	k.handle = k.loc.handle
	return nil
}

func algorithmName(algorithm string) string {
	if algorithm == "" {
		return "P-256"
	}
	return algorithm
}

// writeKeyFile writes a blob file with mode 0600, failing if the file exists.
func writeKeyFile(path string, kf keyFile) error {
	data, err := marshalKeyFile(kf)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("blob=%s: %w", path, err)
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
		return fmt.Errorf("blob=%s: writing: %w", path, err)
	}
	return nil
}

// List returns the keys uri selects: for a URI naming only a TPM ("tpm:" or
// "tpm:?socket=…"), every persistent key in 0x81000000–0x81FFFFFF that this backend can sign
// with (storage keys, restricted keys and unsupported algorithms are left out); for handle=,
// that key; for blob=, the key in the file (read without the TPM).
func List(ctx context.Context, uri string, opts Options) ([]Entry, error) {
	loc, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	loc = loc.absolute()
	if loc.blob != "" {
		kf, err := readKeyFile(loc.blob)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", uri, err)
		}
		pub, err := kf.public.Contents()
		if err != nil {
			return nil, fmt.Errorf("listing %s: %s: %w", uri, loc.keyName(), err)
		}
		info, err := inspect(pub)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %s: %w", uri, loc.keyName(), err)
		}
		return []Entry{{URI: loc.String(), Algorithm: info.algorithm, Public: info.public}}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing %s: %w", uri, err)
	}
	t, err := openTransport(loc, opts)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", uri, err)
	}
	defer t.Close()
	if loc.handle != 0 {
		info, _, err := readPersistent(t, loc)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", uri, err)
		}
		return []Entry{entry(loc, info)}, nil
	}
	handles, err := persistentHandles(t)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", uri, err)
	}
	var entries []Entry
	for _, h := range handles {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("listing %s: %w", uri, err)
		}
		info, _, err := readPersistent(t, loc.withHandle(h))
		switch {
		case errors.Is(err, keyerr.ErrUnavailable):
			return nil, fmt.Errorf("listing %s: %w", uri, err)
		case err != nil:
			continue // not a signing key this backend supports, or evicted meanwhile
		}
		entries = append(entries, entry(loc.withHandle(h), info))
	}
	return entries, nil
}

func entry(loc location, info keyInfo) Entry {
	return Entry{URI: loc.String(), Handle: uint32(loc.handle), Algorithm: info.algorithm, Public: info.public}
}

// persistentHandles returns the TPM's persistent handles in 0x81000000–0x81FFFFFF.
func persistentHandles(t transport.TPM) ([]tpm2.TPMHandle, error) {
	var handles []tpm2.TPMHandle
	next := uint32(firstPersistent)
	for {
		rsp, err := tpm2.GetCapability{Capability: tpm2.TPMCapHandles, Property: next, PropertyCount: 64}.Execute(t)
		if err != nil {
			return nil, tpmError("listing persistent handles", err)
		}
		list, err := rsp.CapabilityData.Data.Handles()
		if err != nil {
			return nil, fmt.Errorf("listing persistent handles: %w", err)
		}
		for _, h := range list.Handle {
			if h > lastPersistentHandle {
				return handles, nil
			}
			handles = append(handles, h)
			next = uint32(h) + 1
		}
		if !rsp.MoreData || len(list.Handle) == 0 {
			return handles, nil
		}
	}
}

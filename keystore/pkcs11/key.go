//go:build cgo

package pkcs11

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	cryptoki "github.com/miekg/pkcs11"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// Key is a private key on a PKCS#11 token. It implements crypto.Signer and keystore.Key, and is
// safe for concurrent use: Sign calls run in parallel on up to 8 sessions (fewer when the
// token allows fewer). It has no Software method: its signatures come from the device.
type Key struct {
	mod   *module
	epoch uint64 // mod.epoch when the key was opened
	tok   token
	obj   *keyObject // the private key as found at Open; obj.handle is not used after
	pub   crypto.PublicKey
	pin   string // kept to log in again when every session went away (which logs the user out)
	// pinRef names where the PIN came from, ref the key (its object=/id= and token), for
	// errors.
	pinRef, ref string
	pool        *pool
	// dead is set when the module answered CKR_CRYPTOKI_NOT_INITIALIZED: it was finalized
	// underneath the key, and the key's handles are meaningless from then on.
	dead atomic.Bool
}

// Open finds the private key named by an RFC 7512 URI (see the package doc), logs in with the
// URI's PIN and returns the key, after checking with one signature that the public key it found
// belongs to it. The URI must name the module (module-path), a token and the key (object= or
// id=, matching exactly one private key). Errors name the URI attribute at fault and never
// contain the PIN; a failure of the device wraps keyerr.ErrUnavailable.
func Open(ctx context.Context, uri string, opts Options) (*Key, error) {
	k, err := open(ctx, uri, opts)
	if err != nil {
		return nil, fmt.Errorf("opening PKCS#11 key: %w", err)
	}
	return k, nil
}

func open(ctx context.Context, uri string, opts Options) (*Key, error) {
	u, pin, err := parse(ctx, uri, opts)
	if err != nil {
		return nil, err
	}
	if !u.hasObject && !u.hasID {
		return nil, errors.New("the URI names no key: add object=<label> or id=<id>")
	}
	mod, tok, sh, err := start(u, pin, false)
	if err != nil {
		return nil, err
	}
	k, err := func() (*Key, error) {
		found, err := findObjects(mod, sh, objectTemplate(cryptoki.CKO_PRIVATE_KEY, u), 2)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s on token %q: %w", u.objectRef(), tok.info.Label, err)
		case len(found) == 0:
			return nil, fmt.Errorf("%s: no such private key on token %q%s", u.objectRef(), tok.info.Label, keyLabels(mod, sh))
		case len(found) > 1:
			return nil, fmt.Errorf("%s: several private keys on token %q match; add id= to choose one", u.objectRef(), tok.info.Label)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return newKey(mod, tok, u, pin, sh, found[0])
	}()
	if err != nil {
		_ = mod.ctx.CloseSession(sh)
		_ = mod.release()
		return nil, err
	}
	if err := k.selfTest(); err != nil {
		_ = k.Close()
		return nil, err
	}
	return k, nil
}

// parse parses uri and reads its PIN.
func parse(ctx context.Context, uri string, opts Options) (*keyURI, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	u, err := parseURI(uri)
	if err != nil {
		return nil, "", fmt.Errorf("parsing the URI: %w", err)
	}
	pin, err := readPIN(u, opts)
	if err != nil {
		return nil, "", err
	}
	return u, pin, nil
}

// start loads the module, finds the token and opens a logged-in session (read-write when rw).
// On error it has released what it took.
func start(u *keyURI, pin string, rw bool) (*module, token, cryptoki.SessionHandle, error) {
	mod, err := acquireModule(u.modulePath)
	if err != nil {
		return nil, token{}, 0, err
	}
	tok, err := findToken(mod, u)
	if err == nil {
		var sh cryptoki.SessionHandle
		if sh, err = openSession(mod, tok, rw, pin, u.pinRef()); err == nil {
			return mod, tok, sh, nil
		}
	}
	_ = mod.release()
	return nil, token{}, 0, err
}

// readPIN returns the PIN of u: the contents of the pin-source file without its trailing
// newline, or the pin-value when opts allow one.
func readPIN(u *keyURI, opts Options) (string, error) {
	if u.hasPINValue {
		if !opts.AllowPINValue {
			return "", errors.New("pin-value: a PIN in the URI is refused unless explicitly allowed (pkcs11.Options.AllowPINValue): it would show wherever the URI does; put the PIN in a file only the server can read and use pin-source=file:/path/to/pin")
		}
		return u.pinValue, nil
	}
	if u.pinSource == "" {
		return "", errors.New("the URI gives no PIN: add pin-source=file:/path/to/pin")
	}
	data, err := os.ReadFile(u.pinSource)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in our message already
		}
		return "", fmt.Errorf("pin-source %q: reading the PIN file: %w", u.pinSource, err)
	}
	pin := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if pin == "" {
		return "", fmt.Errorf("pin-source %q: the PIN file is empty", u.pinSource)
	}
	return pin, nil
}

// newKey makes the Key of the private key object h, found on the logged-in session sh, which
// becomes the key's first pooled session: from then on the key's Close closes it and releases
// the module. On error the caller still owns both. The caller runs selfTest next.
func newKey(mod *module, tok token, u *keyURI, pin string, sh cryptoki.SessionHandle, h cryptoki.ObjectHandle) (*Key, error) {
	ref := fmt.Sprintf("%s on token %q", u.objectRef(), tok.info.Label)
	obj, err := readKey(mod, sh, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if !obj.canSign {
		return nil, fmt.Errorf("%s: the key may not sign (CKA_SIGN is false)", ref)
	}
	k := &Key{
		mod:    mod,
		epoch:  mod.epoch.Load(),
		tok:    tok,
		obj:    obj,
		pub:    obj.public,
		pin:    pin,
		pinRef: u.pinRef(),
		ref:    ref,
	}
	k.pool = newPool(sessionLimit(tok), &session{h: sh, key: h})
	k.pool.open = k.openSession
	k.pool.refresh = k.refresh
	k.pool.discard = k.discard
	k.pool.done = mod.release
	return k, nil
}

// selfTest signs a fixed digest and verifies the signature with the public key found for the
// key, so that a public key object that belongs to another key is caught at Open.
func (k *Key) selfTest() error {
	digest := sha256.Sum256([]byte("signet pkcs11 key self-test"))
	sig, err := k.Sign(nil, digest[:], crypto.SHA256)
	if err != nil {
		return fmt.Errorf("test signature: %w", err)
	}
	ok := false
	switch pub := k.pub.(type) {
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(pub, digest[:], sig)
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) == nil
	}
	if !ok {
		return fmt.Errorf("%s: the public key found for the key does not verify its signature (a public key object of another key has its id or label?)", k.ref)
	}
	return nil
}

// Public returns the key's public key (*ecdsa.PublicKey or *rsa.PublicKey).
func (k *Key) Public() crypto.PublicKey { return k.pub }

// Sign signs digest on the token (crypto.Signer); the device draws its own randomness, so rand
// is unused. opts names the hash (SHA-256, SHA-384 or SHA-512, and digest must be as long), and
// for RSA an *rsa.PSSOptions asks for PSS instead of PKCS #1 v1.5. ECDSA signatures are ASN.1
// DER. When the session vanished (closed from outside) Sign retries once on a fresh one; a
// failure of the device, including a second vanished session and a module finalized
// underneath, is an error wrapping keyerr.ErrUnavailable: the key must be opened again.
func (k *Key) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	sig, err := k.sign(digest, opts)
	if err != nil {
		return nil, fmt.Errorf("signing with PKCS#11 key %s: %w", k.ref, err)
	}
	return sig, nil
}

func (k *Key) sign(digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	mech, data, err := mechanism(k.pub, digest, opts)
	if err != nil {
		return nil, err
	}
	sig, err := k.signOnce(mech, data, false)
	if sessionGone(err) || stateLost(err) {
		sig, err = k.signOnce(mech, data, true)
	}
	if err != nil {
		return nil, err
	}
	if pub, ok := k.pub.(*ecdsa.PublicKey); ok {
		return ecdsaDER(pub, sig)
	}
	return sig, nil
}

// errStale is the error of a key whose module was finalized (and perhaps initialized again)
// since it was opened.
var errStale = fmt.Errorf("%w: the PKCS#11 module was finalized since the key was opened; open the key again", keyerr.ErrUnavailable)

// stale reports whether the key's handles belong to an initialization of the module that has
// ended.
func (k *Key) stale() bool {
	return k.dead.Load() || k.mod.epoch.Load() != k.epoch
}

// signOnce signs data with mech on one pooled session (fresh: refreshing idle sessions
// first).
func (k *Key) signOnce(mech *cryptoki.Mechanism, data []byte, fresh bool) ([]byte, error) {
	if k.stale() {
		return nil, errStale
	}
	s, err := k.pool.get(fresh)
	if err != nil {
		return nil, err
	}
	err = k.mod.ctx.SignInit(s.h, []*cryptoki.Mechanism{mech}, s.key)
	if err == nil && k.obj.alwaysAuth {
		if err = k.mod.ctx.Login(s.h, cryptoki.CKU_CONTEXT_SPECIFIC, k.pin); err != nil && !deviceFailure(err) {
			err = loginError(err, k.pinRef, k.tok.info.Label)
		}
	}
	var sig []byte
	if err == nil {
		sig, err = k.mod.ctx.Sign(s.h, data)
	}
	switch {
	case err == nil:
		k.pool.put(s, keep)
	case notInitialized(err):
		k.dead.Store(true)
		k.pool.put(s, forget)
	case sessionGone(err):
		k.pool.put(s, forget)
	default:
		// A failed C_Sign should end the operation, but not every module does on every
		// error (SoftHSM leaves some active): a new session is cheaper than finding out.
		k.pool.put(s, drop)
	}
	if err != nil {
		return nil, classify("signing on the token", err)
	}
	if k.stale() {
		// The module was initialized again while we signed: the session and key handles may
		// have named something else by the time the module saw them.
		return nil, errStale
	}
	return sig, nil
}

// openSession opens a pooled session: logged in, with the key found in it.
func (k *Key) openSession() (*session, error) {
	sh, err := openSession(k.mod, k.tok, false, k.pin, k.pinRef)
	if err != nil {
		return nil, err
	}
	h, err := k.find(sh)
	if err != nil {
		_ = k.mod.ctx.CloseSession(sh)
		return nil, err
	}
	return &session{h: sh, key: h}, nil
}

// find finds the key in session sh again, by its class, label and id, and checks that it is
// still the key Open found (same type, and same modulus or curve).
func (k *Key) find(sh cryptoki.SessionHandle) (cryptoki.ObjectHandle, error) {
	template := []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_CLASS, cryptoki.CKO_PRIVATE_KEY),
		cryptoki.NewAttribute(cryptoki.CKA_LABEL, k.obj.label),
		cryptoki.NewAttribute(cryptoki.CKA_ID, k.obj.id),
		cryptoki.NewAttribute(cryptoki.CKA_KEY_TYPE, k.obj.keyType),
	}
	if k.obj.identity != nil {
		template = append(template, cryptoki.NewAttribute(k.obj.identityAttr, k.obj.identity))
	}
	found, err := findObjects(k.mod, sh, template, 2)
	switch {
	case err != nil:
		return 0, err
	case len(found) == 0:
		return 0, errors.New("the key is no longer on the token")
	case len(found) > 1:
		return 0, errors.New("another key with the same label and id appeared on the token")
	}
	return found[0], nil
}

// refresh checks an idle session before a retry: it must still exist (else forget it), be
// logged in (else log in again, as the login goes with the last session) and find the key
// (the handle may not have outlived the login); a session that cannot is dropped.
func (k *Key) refresh(s *session) disposition {
	if k.stale() {
		return forget
	}
	info, err := k.mod.ctx.GetSessionInfo(s.h)
	if err != nil {
		return forget
	}
	if info.State == cryptoki.CKS_RO_PUBLIC_SESSION || info.State == cryptoki.CKS_RW_PUBLIC_SESSION {
		if login(k.mod, s.h, k.tok, k.pin, k.pinRef) != nil {
			return drop
		}
	}
	h, err := k.find(s.h)
	if err != nil {
		return drop
	}
	s.key = h
	return keep
}

// discard closes a session the pool drops, unless the key is stale: its handle may belong to
// another key's session of the module's new initialization.
func (k *Key) discard(s *session) {
	if !k.stale() {
		_ = k.mod.ctx.CloseSession(s.h)
	}
}

// Close closes the key's sessions (those signing now as they finish) and releases the module;
// the last key of a module finalizes and unloads it. It does not log out: the login is shared
// with the other keys of the process on the token. Sign fails after Close.
func (k *Key) Close() error {
	if err := k.pool.close(); err != nil {
		return fmt.Errorf("closing PKCS#11 key %s: %w", k.ref, err)
	}
	return nil
}

//go:build cgo

package pkcs11

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	cryptoki "github.com/miekg/pkcs11"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// TestClassify: device failures wrap keyerr.ErrUnavailable, request and configuration errors do
// not; login errors name the PIN's source and say what is wrong.
func TestClassify(t *testing.T) {
	for _, code := range []uint{
		cryptoki.CKR_SESSION_HANDLE_INVALID, cryptoki.CKR_SESSION_CLOSED, cryptoki.CKR_CRYPTOKI_NOT_INITIALIZED,
		cryptoki.CKR_DEVICE_REMOVED, cryptoki.CKR_DEVICE_ERROR, cryptoki.CKR_TOKEN_NOT_PRESENT,
		cryptoki.CKR_USER_NOT_LOGGED_IN, cryptoki.CKR_DEVICE_MEMORY, cryptoki.CKR_GENERAL_ERROR,
		cryptoki.CKR_KEY_HANDLE_INVALID, cryptoki.CKR_OBJECT_HANDLE_INVALID, cryptoki.CKR_SESSION_COUNT,
	} {
		if err := classify("signing", fmt.Errorf("wrapped: %w", cryptoki.Error(code))); !errors.Is(err, keyerr.ErrUnavailable) {
			t.Errorf("%v is not classified as a device failure: %v", cryptoki.Error(code), err)
		}
	}
	for _, code := range []uint{
		cryptoki.CKR_PIN_INCORRECT, cryptoki.CKR_MECHANISM_INVALID, cryptoki.CKR_ARGUMENTS_BAD,
		cryptoki.CKR_KEY_FUNCTION_NOT_PERMITTED, cryptoki.CKR_DATA_LEN_RANGE,
	} {
		if err := classify("signing", cryptoki.Error(code)); errors.Is(err, keyerr.ErrUnavailable) {
			t.Errorf("%v is classified as a device failure: %v", cryptoki.Error(code), err)
		}
	}
	for _, tc := range []struct {
		code        uint
		want        string
		unavailable bool
	}{
		{cryptoki.CKR_PIN_INCORRECT, `pin-source "/p": PIN incorrect for token "t"`, false},
		{cryptoki.CKR_PIN_LEN_RANGE, `pin-source "/p": PIN incorrect`, false},
		{cryptoki.CKR_PIN_LOCKED, `pin-source "/p": the user PIN of token "t" is locked`, false},
		{cryptoki.CKR_PIN_EXPIRED, "has expired", false},
		{cryptoki.CKR_DEVICE_REMOVED, `logging in to token "t"`, true},
	} {
		err := loginError(cryptoki.Error(tc.code), `pin-source "/p"`, "t")
		if !strings.Contains(err.Error(), tc.want) || errors.Is(err, keyerr.ErrUnavailable) != tc.unavailable {
			t.Errorf("loginError(%v) = %v, want %q (unavailable %t)", cryptoki.Error(tc.code), err, tc.want, tc.unavailable)
		}
	}
}

// TestMechanism: the DigestInfo prefixes are PKCS #1's (a raw RSA signature over prefix and
// digest verifies as PKCS #1 v1.5 with that hash), PSS parameters follow the salt options, and
// wrong hashes and digest lengths are refused.
func TestMechanism(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("signet")
	d256, d384, d512 := sha256.Sum256(msg), sha512.Sum384(msg), sha512.Sum512(msg)
	for _, tc := range []struct {
		h      crypto.Hash
		digest []byte
	}{{crypto.SHA256, d256[:]}, {crypto.SHA384, d384[:]}, {crypto.SHA512, d512[:]}} {
		mech, data, err := mechanism(&priv.PublicKey, tc.digest, tc.h)
		if err != nil || mech.Mechanism != cryptoki.CKM_RSA_PKCS {
			t.Fatalf("%v: mechanism = %v, %v", tc.h, mech, err)
		}
		sig, err := rsa.SignPKCS1v15(nil, priv, 0, data) // hash 0: data is signed as given
		if err != nil {
			t.Fatal(err)
		}
		if err := rsa.VerifyPKCS1v15(&priv.PublicKey, tc.h, tc.digest, sig); err != nil {
			t.Errorf("%v: the DigestInfo prefix is wrong: %v", tc.h, err)
		}
	}
	for _, tc := range []struct {
		salt, want int
	}{{rsa.PSSSaltLengthEqualsHash, 32}, {rsa.PSSSaltLengthAuto, 32}, {20, 20}, {1, 1}} {
		mech, data, err := mechanism(&priv.PublicKey, d256[:], &rsa.PSSOptions{SaltLength: tc.salt, Hash: crypto.SHA256})
		want := cryptoki.NewPSSParams(cryptoki.CKM_SHA256, cryptoki.CKG_MGF1_SHA256, uint(tc.want))
		if err != nil || mech.Mechanism != cryptoki.CKM_RSA_PKCS_PSS || string(mech.Parameter) != string(want) || string(data) != string(d256[:]) {
			t.Errorf("PSS salt %d: mechanism = %+v, %v; want CKM_RSA_PKCS_PSS with salt %d", tc.salt, mech, err, tc.want)
		}
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if mech, data, err := mechanism(&ec.PublicKey, d384[:], crypto.SHA384); err != nil || mech.Mechanism != cryptoki.CKM_ECDSA || string(data) != string(d384[:]) {
		t.Errorf("ECDSA: mechanism = %v, %v", mech, err)
	}
	for _, tc := range []struct {
		name   string
		pub    crypto.PublicKey
		digest []byte
		opts   crypto.SignerOpts
		want   string
	}{
		{"short digest", &ec.PublicKey, d256[:20], crypto.SHA256, "digest is 20 bytes"},
		{"SHA-1", &ec.PublicKey, d256[:20], crypto.SHA1, "hash SHA-1 is not supported"},
		{"no hash", &priv.PublicKey, d256[:], crypto.Hash(0), "is not supported"},
		{"nil opts", &priv.PublicKey, d256[:], nil, "no hash"},
		{"PSS on ECDSA", &ec.PublicKey, d256[:], &rsa.PSSOptions{Hash: crypto.SHA256}, "PSS options given for an ECDSA key"},
		{"salt too long", &priv.PublicKey, d256[:], &rsa.PSSOptions{Hash: crypto.SHA256, SaltLength: 300}, "salt length 300 is out of range"},
		{"negative salt", &priv.PublicKey, d256[:], &rsa.PSSOptions{Hash: crypto.SHA256, SaltLength: -5}, "out of range"},
	} {
		if _, _, err := mechanism(tc.pub, tc.digest, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: mechanism = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestECDSADER: the raw r||s of CKM_ECDSA becomes a DER signature that verifies; a raw
// signature of the wrong length is refused.
func TestECDSADER(t *testing.T) {
	for _, curve := range []elliptic.Curve{elliptic.P256(), elliptic.P384()} {
		key, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		digest := sha256.Sum256([]byte("signet"))
		for range 20 { // some r and s have leading zero bytes
			der, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
			if err != nil {
				t.Fatal(err)
			}
			var rs struct{ R, S *big.Int }
			if _, err := asn1.Unmarshal(der, &rs); err != nil {
				t.Fatal(err)
			}
			size := (curve.Params().BitSize + 7) / 8
			raw := append(rs.R.FillBytes(make([]byte, size)), rs.S.FillBytes(make([]byte, size))...)
			got, err := ecdsaDER(&key.PublicKey, raw)
			if err != nil || !ecdsa.VerifyASN1(&key.PublicKey, digest[:], got) {
				t.Fatalf("%s: ecdsaDER = %x, %v; it does not verify", curve.Params().Name, got, err)
			}
		}
		if _, err := ecdsaDER(&key.PublicKey, make([]byte, 10)); err == nil {
			t.Errorf("%s: a 10-byte raw signature was accepted", curve.Params().Name)
		}
	}
}

// TestParseECPoint: CKA_EC_POINT as a DER OCTET STRING (PKCS#11 2.40) and as the bare point;
// other encodings are refused.
func TestParseECPoint(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	point, err := key.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := asn1.Marshal(point)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string][]byte{"DER": wrapped, "bare": point} {
		got, err := parseECPoint(elliptic.P256(), v)
		if err != nil || !got.Equal(&key.PublicKey) {
			t.Errorf("%s: parseECPoint = %v, %v", name, got, err)
		}
	}
	compressed := append([]byte{2 | point[len(point)-1]&1}, point[1:33]...)
	for name, v := range map[string][]byte{
		"compressed": compressed, "other curve": wrapped[:len(wrapped)-1], "empty": nil,
	} {
		if _, err := parseECPoint(elliptic.P384(), v); err == nil {
			t.Errorf("%s: parseECPoint accepted it", name)
		}
	}
}

// TestSessionLimit: 8 sessions unless the token allows fewer.
func TestSessionLimit(t *testing.T) {
	for _, tc := range []struct{ max, want uint }{
		{cryptoki.CK_EFFECTIVELY_INFINITE, 8}, {cryptoki.CK_UNAVAILABLE_INFORMATION, 8}, {3, 3}, {1, 1}, {100, 8},
	} {
		tok := token{info: cryptoki.TokenInfo{MaxSessionCount: tc.max}}
		if got := sessionLimit(tok); got != int(tc.want) {
			t.Errorf("sessionLimit(max %d) = %d, want %d", tc.max, got, tc.want)
		}
	}
}

// TestPool: the pool never lends more than its limit nor one session twice at a time; Close
// refuses further gets, and done runs once, after the last session lent out comes back.
func TestPool(t *testing.T) {
	var next atomic.Int64
	var closed, done atomic.Int64
	p := newPool(3, &session{h: 1})
	next.Store(1)
	p.open = func() (*session, error) { return &session{h: cryptoki.SessionHandle(next.Add(1))}, nil }
	p.refresh = func(*session) disposition { return keep }
	p.discard = func(*session) { closed.Add(1) }
	p.done = func() error { done.Add(1); return nil }

	var mu sync.Mutex
	inUse := map[cryptoki.SessionHandle]bool{}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for range 50 {
				s, err := p.get(i%4 == 0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if inUse[s.h] || len(inUse) >= 3 {
					t.Errorf("session %d lent twice, or more than 3 sessions lent", s.h)
				}
				inUse[s.h] = true
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				delete(inUse, s.h)
				mu.Unlock()
				p.put(s, keep)
			}
		})
	}
	wg.Wait()
	if n := next.Load(); n > 3 {
		t.Errorf("the pool opened %d sessions, limit 3", n)
	}
	held, err := p.get(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.get(false); !errors.Is(err, errClosed) {
		t.Errorf("get after close: %v, want errClosed", err)
	}
	if done.Load() != 0 {
		t.Error("done ran while a session was lent out")
	}
	p.put(held, keep)
	if done.Load() != 1 || closed.Load() != next.Load() {
		t.Errorf("after the last put: done ran %d times, %d of %d sessions closed", done.Load(), closed.Load(), next.Load())
	}
	if err := p.close(); err != nil || done.Load() != 1 {
		t.Errorf("a second close: %v, done ran %d times", err, done.Load())
	}
}

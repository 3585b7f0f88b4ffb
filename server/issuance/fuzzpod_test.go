package issuance_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
)

// seedPodKeys adds valid and invalid key fields to f: stubs of every kind of key (one
// carrying a SAN), a broken stub, and v1beta1 keys with proofs, good and bad.
func seedPodKeys(f *testing.F, add func(stub, spkiDER, pop []byte, podUID string)) {
	f.Helper()
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.P384, testpki.P521, testpki.Ed25519, testpki.RSA3072, testpki.RSA2048, testpki.P224} {
		key := testpki.Key(f, kt)
		add(stub(f, key, nil), nil, nil, testPod.PodUID)
		add(nil, spki(f, key), testpki.ProofOfPossession(f, key, testPod.PodUID), testPod.PodUID)
	}
	key := testpki.Key(f, testpki.P256)
	add(stub(f, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}, DNSNames: []string{"a.example"}}), nil, nil, testPod.PodUID)
	add(pemToDER(f, testpki.BreakSignature(f, testpki.CSR(f, key, &x509.CertificateRequest{}))), nil, nil, testPod.PodUID)
	add(nil, spki(f, key), testpki.ProofOfPossession(f, key, "other"), testPod.PodUID)
	add(stub(f, key, nil), spki(f, key), nil, "")
	add(nil, nil, nil, "")
}

// FuzzParsePodKey: ParsePodKey never panics, every refusal wraps exactly one sentinel, and a
// key it returns is supported and proven: its stub's signature verifies, or the request
// carried a proof and a pod UID.
func FuzzParsePodKey(f *testing.F) {
	seedPodKeys(f, func(s, k, p []byte, uid string) { f.Add(s, k, p, uid) })
	f.Fuzz(func(t *testing.T, stubDER, spkiDER, pop []byte, podUID string) {
		pod := testPod
		pod.PodUID = podUID
		key, err := issuance.ParsePodKey(issuance.PodRequest{Pod: pod, StubPKCS10Request: stubDER, PKIXPublicKey: spkiDER, ProofOfPossession: pop})
		if err != nil {
			if key != nil {
				t.Fatal("ParsePodKey returned a key and an error")
			}
			checkRefusal(t, err)
			return
		}
		if err := issuance.CheckPublicKey(key.PublicKey); err != nil {
			t.Fatalf("accepted an unsupported key: %v", err)
		}
		switch {
		case key.Stub != nil:
			if err := key.Stub.CheckSignature(); err != nil || len(spkiDER)+len(pop) != 0 {
				t.Fatalf("accepted a stub whose signature does not verify (%v) or along with a v1beta1 key", err)
			}
		case len(pop) == 0 || podUID == "" || len(stubDER) != 0:
			t.Fatal("accepted a v1beta1 key without a proof over a pod UID, or along with a stub")
		}
		_ = key.StubContents()
	})
}

// FuzzIssuePod feeds fuzzed keys, pod names and lifetimes through a pod-identity issuer with
// the lint gate, and checks every certificate it issues: not a CA, for the request's key, one
// URI SAN naming exactly the requested namespace and service account, and a validity and
// refresh time the kube-apiserver accepts.
func FuzzIssuePod(f *testing.F) {
	ca := testpki.CA(f)
	is := podIssuer(f, caOf(ca), 24*time.Hour, now)
	seedPodKeys(f, func(s, k, p []byte, uid string) { f.Add(s, k, p, "shop", "web", int32(86400)) })
	for _, names := range [][2]string{{"Shop", "web"}, {"shop", "web/../admin"}, {"shop", "a.b-c"}, {"", "web"}, {"ns", "sa?x=1"}, {"ns", "sa#frag"}} {
		f.Add(stub(f, testpki.Key(f, testpki.P256), nil), []byte(nil), []byte(nil), names[0], names[1], int32(3600))
	}
	f.Fuzz(func(t *testing.T, stubDER, spkiDER, pop []byte, namespace, serviceAccount string, maxExp int32) {
		req := issuance.PodRequest{SignerName: podSigner, Pod: testPod, StubPKCS10Request: stubDER, PKIXPublicKey: spkiDER, ProofOfPossession: pop, MaxExpirationSeconds: maxExp}
		req.Pod.Namespace, req.Pod.ServiceAccountName = namespace, serviceAccount
		cert, err := is.IssuePod(req)
		if err != nil {
			if cert != nil {
				t.Fatal("IssuePod returned a certificate and an error")
			}
			checkRefusal(t, err)
			return
		}
		leaf := cert.Leaf
		if leaf.IsCA || !leaf.BasicConstraintsValid || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
			t.Fatalf("issued a certificate that can act as a CA: IsCA=%t KeyUsage=%b", leaf.IsCA, leaf.KeyUsage)
		}
		key, err := issuance.ParsePodKey(req)
		if err != nil || !samePublicKey(key.PublicKey, leaf.PublicKey) {
			t.Fatalf("issued for a key ParsePodKey refuses (%v) or for another key", err)
		}
		want := "spiffe://cluster.local/ns/" + namespace + "/sa/" + serviceAccount
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want || len(leaf.DNSNames)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 || len(leaf.Subject.Names) != 0 {
			t.Fatalf("names: subject %q, URIs %v, DNS %v; want only the URI %s", leaf.Subject, leaf.URIs, leaf.DNSNames, want)
		}
		lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
		if lifetime < time.Hour || lifetime > time.Duration(maxExp)*time.Second || !leaf.NotBefore.Equal(now.Add(-time.Minute)) {
			t.Fatalf("validity %s..%s (%s) for maxExpirationSeconds %d", leaf.NotBefore, leaf.NotAfter, lifetime, maxExp)
		}
		if cert.BeginRefreshAt.Before(leaf.NotBefore.Add(10*time.Minute)) || cert.BeginRefreshAt.After(leaf.NotAfter.Add(-10*time.Minute)) {
			t.Fatalf("beginRefreshAt %s outside the kube-apiserver's window", cert.BeginRefreshAt)
		}
	})
}

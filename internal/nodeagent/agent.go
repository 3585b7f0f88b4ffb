// Package nodeagent is signet-node's work (seed 004's kubelet authentication plugin): it
// obtains the kubelet's client certificate through TPM attestation and keeps it renewed. For
// each certificate it runs the attestation exchange with the signing server (challenge,
// credential activation in the TPM, ticket), makes a fresh software key and a request for
// system:node:<name> with the provider ID, has the TPM certify its binding key and vouch for
// the request's key (attestation/nodetpm), submits the request as a CertificateSigningRequest
// for the attested signer, and waits for the approver and the signer. The result is cached
// under a file lock, since the kubelet may call the plugin several times at once, and
// returned until the renewal point.
//
// The kubelet's key is a software key: client-go's exec credential protocol hands the kubelet
// a PEM private key, so a key that never leaves the TPM cannot be its TLS key. What the TPM
// guarantees is that every certificate was asked for by this node's TPM, now: a copy of the
// key and certificate is good until the certificate expires, and cannot be renewed without
// the TPM.
package nodeagent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/google/go-tpm/tpm2/transport"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	csrutil "k8s.io/client-go/util/certificate/csr"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
)

// DefaultRenewFraction is the fraction of a certificate's life after which the agent attests
// again for a new one (the kubelet's own rotation renews between 70 % and 90 %).
const DefaultRenewFraction = 0.7

// Back-off after failed renewals while the current certificate is still valid.
const (
	backoffBase = 10 * time.Second
	backoffMax  = 5 * time.Minute
)

// Config configures an Agent.
type Config struct {
	// TPM is the node's TPM.
	TPM transport.TPM
	// AttestURL is the signing server's attestation endpoint (https://host:port), verified
	// against AttestRoots.
	AttestURL   string
	AttestRoots *x509.CertPool
	// NodeName is the node's name; ProviderID its provider ID, carried in the request.
	NodeName, ProviderID string
	// SignerName is the attested client signer, e.g.
	// example.com/kube-apiserver-client-kubelet-tpm; ServingSignerName the attested serving
	// signer (kubelet-serving-tpm), for Serving.
	SignerName, ServingSignerName string
	// Bootstrap is how to reach the API server with the bootstrap credentials, for a node
	// with no valid certificate. A renewal authenticates with the current certificate.
	Bootstrap *rest.Config
	// CacheDir holds the current certificate and key, and the lock.
	CacheDir string
	// RenewFraction is the fraction of a certificate's life after which it is renewed.
	// Default DefaultRenewFraction.
	RenewFraction float64
	// Lifetime, if set, is the lifetime asked for (spec.expirationSeconds).
	Lifetime time.Duration
	Clock    clock.PassiveClock
	Log      *slog.Logger
}

// Agent obtains and renews the node's client certificate.
type Agent struct {
	cfg    Config
	attest *attestClient
}

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.TPM == nil:
		return nil, errors.New("no TPM")
	case cfg.AttestURL == "":
		return nil, errors.New("no attestation endpoint URL")
	case cfg.SignerName == "":
		return nil, errors.New("no signer name")
	case cfg.Bootstrap == nil:
		return nil, errors.New("no API server configuration")
	case cfg.CacheDir == "":
		return nil, errors.New("no cache directory")
	}
	if err := attestation.CheckNodeName(cfg.NodeName); err != nil {
		return nil, err
	}
	if cfg.RenewFraction <= 0 || cfg.RenewFraction >= 1 {
		cfg.RenewFraction = DefaultRenewFraction
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, attest: newAttestClient(cfg.AttestURL, cfg.AttestRoots)}, nil
}

// Credential returns the node's client credential: the cached one until its renewal point,
// else a new one through attestation. When a renewal fails and the cached certificate is
// still valid, that one is returned with a renewal point after a back-off (10 s doubling to
// 5 minutes, never past its expiry), so that the kubelet keeps working and calls again.
func (a *Agent) Credential(ctx context.Context) (*Credential, error) {
	unlock, err := lock(a.cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return a.current(ctx, clientKind, nil)
}

// Serving returns the node's serving certificate for the names dns and ips, as Credential
// does: the cached one (in CacheDir, serving.crt and serving.key, where the kubelet's
// --tls-cert-file and --tls-private-key-file point) until its renewal point or until the names
// change, else a new one through attestation, requested as the node with its client
// certificate (obtained first, if need be) for Config.ServingSignerName.
func (a *Agent) Serving(ctx context.Context, dns []string, ips []net.IP) (*Credential, error) {
	if a.cfg.ServingSignerName == "" {
		return nil, errors.New("no serving signer name")
	}
	if len(dns)+len(ips) == 0 {
		return nil, errors.New("a serving certificate needs at least one DNS name or IP address")
	}
	unlock, err := lock(a.cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	client, err := a.current(ctx, clientKind, nil)
	if err != nil {
		return nil, fmt.Errorf("obtaining the node's client certificate, to ask for its serving certificate: %w", err)
	}
	return a.current(ctx, servingKind, &servingRequest{dns: dns, ips: ips, client: client})
}

// servingRequest is what a serving certificate is asked for with: its names, and the node's
// client credential to ask with.
type servingRequest struct {
	dns    []string
	ips    []net.IP
	client *Credential
}

// current returns the cached credential of kind until its renewal point (and, for a serving
// certificate, while it has exactly the names asked for), else obtains a new one, keeping the
// cached one through failed renewals while it is valid. The caller holds the lock.
func (a *Agent) current(ctx context.Context, k kind, srv *servingRequest) (*Credential, error) {
	now := a.cfg.Clock.Now()
	cur := readCache(a.cfg.CacheDir, k, a.cfg.RenewFraction)
	if cur != nil && now.Before(cur.RenewAt) && (srv == nil || sameNames(cur, srv)) {
		return cur, nil
	}
	valid := cur != nil && now.Before(cur.NotAfter) && (srv == nil || sameNames(cur, srv))
	next, err := a.obtain(ctx, k, cur, valid, srv)
	if err != nil {
		f := readFailures(a.cfg.CacheDir, k)
		f.Count++
		f.Last = now
		writeFailures(a.cfg.CacheDir, k, f)
		if !valid {
			return nil, err
		}
		wait := min(backoffBase<<min(f.Count-1, 10), backoffMax)
		retry := *cur
		retry.RenewAt = minTime(now.Add(wait), cur.NotAfter)
		a.cfg.Log.Warn("renewing a node certificate failed; the current one stays in use", "certificate", string(k), "error", err.Error(),
			"failures", f.Count, "retry_at", retry.RenewAt, "not_after", cur.NotAfter)
		return &retry, nil
	}
	if err := writeCache(a.cfg.CacheDir, k, next); err != nil {
		return nil, err
	}
	writeFailures(a.cfg.CacheDir, k, failures{})
	a.cfg.Log.Info("node certificate obtained through TPM attestation", "certificate", string(k), "node", a.cfg.NodeName,
		"not_after", next.NotAfter, "renew_at", next.RenewAt)
	return next, nil
}

// sameNames reports whether the cached serving certificate has exactly the names asked for.
func sameNames(cur *Credential, srv *servingRequest) bool {
	leaf, err := cur.leaf()
	if err != nil {
		return false
	}
	want := slices.Clone(srv.dns)
	slices.Sort(want)
	have := slices.Clone(leaf.DNSNames)
	slices.Sort(have)
	if !slices.Equal(want, have) || len(srv.ips) != len(leaf.IPAddresses) {
		return false
	}
	for _, ip := range srv.ips {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// obtain runs one attestation and request: the exchange, the key and request, the TPM's
// evidence, the CertificateSigningRequest, and the wait for its certificate. A client
// certificate is asked for as the node when cur is valid (a renewal), else with the
// bootstrap credentials; a serving certificate always as the node, with srv.client.
func (a *Agent) obtain(ctx context.Context, k kind, cur *Credential, renew bool, srv *servingRequest) (*Credential, error) {
	signer := a.cfg.SignerName
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	var dns []string
	var ips []net.IP
	as, asNode := cur, renew
	if k == servingKind {
		signer, dns, ips = a.cfg.ServingSignerName, srv.dns, srv.ips
		usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
		as, asNode = srv.client, true
	}
	full, key, err := a.attestedRequest(ctx, dns, ips)
	if err != nil {
		return nil, err
	}
	client, err := a.kubeClient(as, asNode)
	if err != nil {
		return nil, err
	}
	var duration *time.Duration
	if a.cfg.Lifetime > 0 {
		duration = &a.cfg.Lifetime
	}
	name, uid, err := csrutil.RequestCertificateWithContext(ctx, client, full, "", signer, duration, usages, key)
	if err != nil {
		return nil, fmt.Errorf("creating the CertificateSigningRequest: %w", err)
	}
	a.cfg.Log.Info("CertificateSigningRequest created; waiting for approval and signing", "csr", name, "signer", signer)
	certPEM, err := csrutil.WaitForCertificate(ctx, client, name, uid)
	if err != nil {
		return nil, fmt.Errorf("waiting for the certificate of CertificateSigningRequest %s: %w", name, err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return newCredential(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), a.cfg.RenewFraction)
}

// attestedRequest runs the attestation exchange and returns the request, with its evidence,
// for a new key.
func (a *Agent) attestedRequest(ctx context.Context, dns []string, ips []net.IP) ([]byte, *ecdsa.PrivateKey, error) {
	node := nodetpm.New(a.cfg.TPM)
	keys, err := node.Keys()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the TPM's keys: %w", err)
	}
	ch, err := a.attest.challenge(ctx, attestation.ChallengeRequest{Node: a.cfg.NodeName, EKCertificate: keys.EKCertificate,
		EKPublic: keys.EKPublic, AKPublic: keys.AKPublic})
	if err != nil {
		return nil, nil, err
	}
	secret, err := node.Activate(keys, ch)
	if err != nil {
		return nil, nil, err
	}
	act, err := a.attest.activate(ctx, attestation.ActivationRequest{ID: ch.ID, Secret: secret})
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + a.cfg.NodeName, Organization: []string{"system:nodes"}},
		DNSNames: dns, IPAddresses: ips}
	if a.cfg.ProviderID != "" {
		ext, err := attestation.ProviderIDExtension(a.cfg.ProviderID)
		if err != nil {
			return nil, nil, err
		}
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, ext)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, nil, fmt.Errorf("making the request: %w", err)
	}
	spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	certified, err := node.Certify(act.Nonce, spki)
	if err != nil {
		return nil, nil, err
	}
	ev := nodetpm.Evidence(keys, act.Ticket, certified)
	if len(act.QuotePCRs) > 0 {
		q, err := node.Quote(act.Nonce, act.QuotePCRs)
		if err != nil {
			return nil, nil, err
		}
		ev = nodetpm.WithQuote(ev, q)
	}
	full, err := attestation.Encode(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), ev)
	if err != nil {
		return nil, nil, err
	}
	return full, key, nil
}

// kubeClient is a client of the API server: as the node, with the current certificate, for
// a renewal; else with the bootstrap credentials.
func (a *Agent) kubeClient(cur *Credential, renew bool) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(a.cfg.Bootstrap)
	if renew {
		cfg = rest.AnonymousClientConfig(cfg)
		cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = cur.CertPEM, cur.KeyPEM
	}
	cfg.UserAgent = "signet-node"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the API server client: %w", err)
	}
	return client, nil
}

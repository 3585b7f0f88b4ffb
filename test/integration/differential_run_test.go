package integration

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/signerclient"
)

// caseRun is one case on its way through both signers.
type caseRun struct {
	tc   diffCase
	key  crypto.Signer
	pem  []byte // the PKCS#10 request
	name string // the CSR object's name

	createErr  error
	created    *certificatesv1.CertificateSigningRequest // as the apiserver stored it
	approveErr error
	approvedAt time.Time // just before the approval

	obj       *certificatesv1.CertificateSigningRequest // the latest seen; decided by KCM if decided
	decided   bool
	decidedAt time.Time // when KCM's decision was first seen

	issued     signerclient.Issued
	signetErr  error
	signetFrom time.Time // Signet's call, from the first attempt to the answer
	signetTo   time.Time
}

// decideAll takes every case through both signers: build the requests, create every CSR,
// approve them all, wait for kube-controller-manager's decisions, and ask Signet about each.
func (d *differential) decideAll(t *testing.T, cases []diffCase) []*caseRun {
	t.Helper()
	runs := make([]*caseRun, len(cases))
	for i, tc := range cases {
		r := &caseRun{tc: tc, name: fmt.Sprintf("diff-%s-%03d", diffSigners[tc.signer].abbrev, i)}
		r.key = diffKey(t, tc.key)
		r.pem = testpki.CSR(t, r.key, tc.csr)
		if tc.brokenSignature {
			r.pem = testpki.BreakSignature(t, r.pem)
		}
		runs[i] = r
	}
	ctx := t.Context()
	viaAPI, viaEtcd := split(runs, func(r *caseRun) bool { return r.tc.store == storeAPI })
	parallel(viaAPI, func(r *caseRun) { d.createAPI(ctx, r) })
	if err := d.etcd.locate(ctx, viaAPI); err != nil {
		t.Fatal(err)
	}
	parallel(viaEtcd, func(r *caseRun) { d.createEtcd(ctx, r) })
	parallel(runs, func(r *caseRun) {
		if r.created != nil {
			r.approvedAt = time.Now()
			r.approveErr = d.cluster.Approve(ctx, r.name)
		}
	})
	d.waitKCM(t, runs)
	parallel(runs, func(r *caseRun) {
		if r.obj != nil {
			d.askSignet(ctx, r)
		}
	})
	return runs
}

// object is the CertificateSigningRequest of r as its identity asks for it.
func (r *caseRun) object() *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: r.name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           r.pem,
			SignerName:        r.tc.signer,
			ExpirationSeconds: r.tc.expirationSeconds,
			Usages:            r.tc.usages,
		},
	}
}

// createAPI creates r's CSR through certificates.k8s.io/v1 as r's identity.
func (d *differential) createAPI(ctx context.Context, r *caseRun) {
	r.created, r.createErr = d.as[r.tc.as].client.CertificatesV1().CertificateSigningRequests().Create(ctx, r.object(), metav1.CreateOptions{})
	if r.createErr != nil {
		r.created = nil
	}
}

// createEtcd writes r's CSR to etcd as the apiserver would have stored it for r's identity,
// and reads it back through the apiserver.
func (d *differential) createEtcd(ctx context.Context, r *caseRun) {
	id := d.as[r.tc.as]
	obj := r.object()
	obj.TypeMeta = metav1.TypeMeta{APIVersion: certificatesv1.SchemeGroupVersion.String(), Kind: "CertificateSigningRequest"}
	obj.UID, obj.CreationTimestamp = uuid.NewUUID(), metav1.Now()
	obj.Spec.Username, obj.Spec.Groups = id.username, id.groups
	if r.createErr = d.etcd.put(ctx, obj); r.createErr != nil {
		return
	}
	_, admin := d.cluster.Admin()
	r.created, r.createErr = admin.CertificatesV1().CertificateSigningRequests().Get(ctx, r.name, metav1.GetOptions{})
	if r.createErr != nil {
		r.created = nil
	}
}

// waitKCM polls the CSRs until kube-controller-manager has decided every approved one (a
// certificate or a Failed condition), recording when each decision was first seen. It stops
// early if kube-controller-manager exits; undecided runs keep their latest object.
func (d *differential) waitKCM(t *testing.T, runs []*caseRun) {
	t.Helper()
	pending := map[string]*caseRun{}
	for _, r := range runs {
		if r.created != nil && r.approveErr == nil {
			pending[r.name] = r
		}
	}
	_, admin := d.cluster.Admin()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, diffKCMTimeout, true, func(ctx context.Context) (bool, error) {
		if err := d.kcm.Running(); err != nil {
			return false, err
		}
		list, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		now := time.Now()
		for i := range list.Items {
			r := pending[list.Items[i].Name]
			if r == nil {
				continue
			}
			r.obj = &list.Items[i]
			if signed(r.obj) || condition(r.obj, certificatesv1.CertificateFailed) != nil {
				r.decided, r.decidedAt = true, now
				delete(pending, r.name)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		t.Logf("kube-controller-manager left %d CSRs undecided: %v; log %s%s", len(pending), err, d.kcm.LogPath(), d.kcm.Explain())
	}
}

// askSignet asks Signet to sign r's CSR as the watcher would (signerclient.SignCSR),
// retrying transient errors, and records the answer or the terminal error.
func (d *differential) askSignet(ctx context.Context, r *caseRun) {
	r.signetFrom = time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, diffSignetTimeout, true, func(ctx context.Context) (bool, error) {
		r.issued, r.signetErr = d.signet.SignCSR(ctx, r.obj)
		_, _, terminal := signerclient.Classify(r.signetErr)
		return r.signetErr == nil || terminal, nil
	})
	r.signetTo = time.Now()
	if err != nil {
		r.signetErr = fmt.Errorf("no answer within %s: %w (last error: %v)", diffSignetTimeout, err, r.signetErr)
	}
}

// parallel runs f on every run, a few at a time, and waits for all.
func parallel(runs []*caseRun, f func(*caseRun)) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(r)
		}()
	}
	wg.Wait()
}

// split returns the runs for which in is true, and the others.
func split(runs []*caseRun, in func(*caseRun) bool) (yes, no []*caseRun) {
	for _, r := range runs {
		if in(r) {
			yes = append(yes, r)
		} else {
			no = append(no, r)
		}
	}
	return yes, no
}

// publicKeyOf returns the public key of a PEM PKCS#10 request.
func publicKeyOf(csrPEM []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil {
		return nil, fmt.Errorf("spec.request: no PEM block")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spec.request: %w", err)
	}
	return req.PublicKey, nil
}

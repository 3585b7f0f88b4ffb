package main

// The PodCertificateRequest workload: create a PodCertificateRequest for podSigner (there is
// no approval step); latency runs from the create call's return to the Issued condition seen
// on the watch. The ceiling writes the Issued status itself, with a certificate made for the
// request's key just before the run (the API server checks that the leaf carries that key and
// that notBefore is within five minutes of its clock).

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
	"math/big"
	"strconv"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// pcrNamespace holds the run's PodCertificateRequests.
const pcrNamespace = "default"

type pcrObjects struct{ b *clusterBench }

// pcrAnswer is what the ceiling writes into a PodCertificateRequest's status.
type pcrAnswer struct {
	chain                        string
	notBefore, notAfter, refresh metav1.Time
}

// makeStubs pre-generates n P-256 keys and their empty stub PKCS#10 requests, as the kubelet
// makes them (not timed).
func (b *clusterBench) makeStubs(n int) error {
	b.stubs = make([][]byte, n)
	b.stubKeys = make([]*ecdsa.PublicKey, n)
	for i := range n {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
		if err != nil {
			return err
		}
		b.stubs[i], b.stubKeys[i] = der, &key.PublicKey
	}
	return nil
}

// makePCRAnswers signs, for the ceiling, one certificate per stub key with a throwaway CA, valid
// from a minute ago for 24 hours (not timed; made right before the run for the API server's
// five-minute notBefore window).
func (b *clusterBench) makePCRAnswers(n int) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench ceiling CA"}, IsCA: true, BasicConstraintsValid: true}
	nb := time.Now().Add(-time.Minute).Truncate(time.Second)
	na := nb.Add(24 * time.Hour)
	b.answers = make([]pcrAnswer, n)
	for i := range n {
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), NotBefore: nb, NotAfter: na,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, ca, b.stubKeys[i], caKey)
		if err != nil {
			return err
		}
		b.answers[i] = pcrAnswer{chain: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			notBefore: metav1.NewTime(nb), notAfter: metav1.NewTime(na), refresh: metav1.NewTime(na.Add(-8 * time.Hour))}
	}
	return nil
}

func (b *clusterBench) newPCR(name, tag string, i int) *certificatesv1.PodCertificateRequest {
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pcrNamespace, Labels: map[string]string{runLabel: tag},
			Annotations: map[string]string{"bench/index": strconv.Itoa(i)}},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: podSigner,
			PodName:    fmt.Sprintf("pod-%d", i), PodUID: types.UID(fmt.Sprintf("%s-pod-%d", tag, i)),
			ServiceAccountName: "bench", ServiceAccountUID: "bench-sa-uid",
			NodeName: "node-1", NodeUID: "node-1-uid",
			StubPKCS10Request: b.stubs[i],
		},
	}
}

func (o pcrObjects) warmUp(ctx context.Context, tag string) error {
	pcrs := o.b.kube.CertificatesV1().PodCertificateRequests(pcrNamespace)
	name := "warm-" + tag
	if _, err := pcrs.Create(ctx, o.b.newPCR(name, "warm-"+tag, 0), metav1.CreateOptions{}); err != nil {
		return err
	}
	defer func() { _ = pcrs.Delete(context.Background(), name, metav1.DeleteOptions{}) }()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		got, err := pcrs.Get(ctx, name, metav1.GetOptions{})
		if err == nil && got.Status.CertificateChain != "" {
			return o.b.checkCertificate([]byte(got.Status.CertificateChain))
		}
		if err == nil && len(got.Status.Conditions) > 0 {
			c := got.Status.Conditions[0]
			return fmt.Errorf("the warm-up PodCertificateRequest was answered %s/%s: %s", c.Type, c.Reason, c.Message)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("signer did not issue the warm-up PodCertificateRequest within 90s (see its log, <scenario tag>.log in the folder the bench keeps)")
}

func (o pcrObjects) list(ctx context.Context, tag string) (string, error) {
	l, err := o.b.kube.CertificatesV1().PodCertificateRequests(pcrNamespace).List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + tag})
	if err != nil {
		return "", err
	}
	return l.ResourceVersion, nil
}

func (o pcrObjects) watch(ctx context.Context, tag, rv string) (watch.Interface, error) {
	return o.b.kube.CertificatesV1().PodCertificateRequests(pcrNamespace).Watch(ctx,
		metav1.ListOptions{LabelSelector: runLabel + "=" + tag, ResourceVersion: rv, AllowWatchBookmarks: true})
}

func (o pcrObjects) outcome(obj runtime.Object) (int, string, bool, bool) {
	pcr, ok := obj.(*certificatesv1.PodCertificateRequest)
	if !ok {
		return -1, "", false, false
	}
	i, err := strconv.Atoi(pcr.Annotations["bench/index"])
	if err != nil {
		i = -1
	}
	issued, refused := false, false
	for _, c := range pcr.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			issued = true
		case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			refused = true
		}
	}
	return i, pcr.ResourceVersion, issued, refused
}

// submit creates PodCertificateRequest i and, for the ceiling, writes its Issued status.
func (o pcrObjects) submit(ctx context.Context, tag string, i int, self bool, created []time.Time) error {
	pcrs := o.b.kube.CertificatesV1().PodCertificateRequests(pcrNamespace)
	pcr, err := pcrs.Create(ctx, o.b.newPCR(fmt.Sprintf("%s-%d", tag, i), tag, i), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	created[i] = time.Now() // each index is written by one worker, read after wg.Wait
	if !self {
		return nil
	}
	a := o.b.answers[i]
	pcr.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "SignetBench", Message: "written by the benchmark", LastTransitionTime: metav1.Now()}},
		CertificateChain: a.chain, NotBefore: &a.notBefore, NotAfter: &a.notAfter, BeginRefreshAt: &a.refresh,
	}
	if _, err := pcrs.UpdateStatus(ctx, pcr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

func (o pcrObjects) deleteAll(tag string) {
	_ = o.b.kube.CertificatesV1().PodCertificateRequests(pcrNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: runLabel + "=" + tag})
}

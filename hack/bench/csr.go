package main

// The CertificateSigningRequest workload: create a kubernetes.io/kube-apiserver-client CSR,
// approve it; latency runs from the approval to the certificate seen on the watch.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

type csrObjects struct{ b *clusterBench }

func (o csrObjects) warmUp(ctx context.Context, tag string) error {
	csrs := o.b.kube.CertificatesV1().CertificateSigningRequests()
	name := "warm-" + tag
	csr, err := csrs.Create(ctx, o.b.newCSR(name, "warm-"+tag, 0), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = csrs.Delete(context.Background(), name, metav1.DeleteOptions{}) }()
	approve(csr)
	if _, err := csrs.UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		got, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(got.Status.Certificate) > 0 {
			return o.b.checkCertificate(got.Status.Certificate)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("signer did not sign the warm-up CSR within 90s (see its log, <scenario tag>.log in the folder the bench keeps)")
}

func (o csrObjects) list(ctx context.Context, tag string) (string, error) {
	l, err := o.b.kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + tag})
	if err != nil {
		return "", err
	}
	return l.ResourceVersion, nil
}

func (o csrObjects) watch(ctx context.Context, tag, rv string) (watch.Interface, error) {
	return o.b.kube.CertificatesV1().CertificateSigningRequests().Watch(ctx,
		metav1.ListOptions{LabelSelector: runLabel + "=" + tag, ResourceVersion: rv, AllowWatchBookmarks: true})
}

func (o csrObjects) outcome(obj runtime.Object) (int, string, bool, bool) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return -1, "", false, false
	}
	i, err := strconv.Atoi(csr.Annotations["bench/index"])
	if err != nil {
		i = -1
	}
	refused := slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == certificatesv1.CertificateFailed || c.Type == certificatesv1.CertificateDenied
	})
	return i, csr.ResourceVersion, len(csr.Status.Certificate) > 0, refused
}

// submit creates CSR i, approves it and, for the ceiling, writes the dummy certificate.
func (o csrObjects) submit(ctx context.Context, tag string, i int, self bool, approved []time.Time) error {
	csrs := o.b.kube.CertificatesV1().CertificateSigningRequests()
	csr := o.b.newCSR(fmt.Sprintf("%s-%d", tag, i), tag, i)
	csr.Annotations = map[string]string{"bench/index": strconv.Itoa(i)}
	csr, err := csrs.Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	approve(csr)
	csr, err = csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	approved[i] = time.Now() // each index is written by one worker, read after wg.Wait
	if self {
		csr.Status.Certificate = o.b.dummy
		if _, err := csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	}
	return nil
}

func (o csrObjects) deleteAll(tag string) {
	_ = o.b.kube.CertificatesV1().CertificateSigningRequests().DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: runLabel + "=" + tag})
}

func (b *clusterBench) newCSR(name, tag string, i int) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{runLabel: tag}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: b.requests[i], SignerName: clientSigner,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

func approve(csr *certificatesv1.CertificateSigningRequest) {
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "SignetBench", Message: "approved by the benchmark", LastUpdateTime: metav1.Now(),
	})
}

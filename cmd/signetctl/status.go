package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/ledger"
)

// objectStatus is what status shows of one object (-o json|yaml).
type objectStatus struct {
	Kind        string          `json:"kind"`
	APIVersion  string          `json:"apiVersion"`
	Namespace   string          `json:"namespace,omitempty"`
	Name        string          `json:"name"`
	UID         string          `json:"uid"`
	SignerName  string          `json:"signerName"`
	Requester   string          `json:"requester"`
	Created     time.Time       `json:"created"`
	State       string          `json:"state"`
	Conditions  []conditionView `json:"conditions"`
	Certificate *described      `json:"certificate,omitempty"`
	Events      []eventView     `json:"events"`
	Ledger      ledgerView      `json:"ledger"`
}

// conditionView is one condition of the object's status.
type conditionView struct {
	Type    string    `json:"type"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time,omitzero"`
}

// eventView is one Event about the object.
type eventView struct {
	Time    time.Time `json:"time,omitzero"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count,omitempty"`
	Source  string    `json:"source,omitempty"`
}

// ledgerView is what the server's ledger holds about the object (LedgerService.FindRecords),
// or why it is not shown.
type ledgerView struct {
	Server  string          `json:"server,omitempty"`
	Records []ledger.Record `json:"records"`
	Note    string          `json:"note,omitempty"`
}

// statusCommand is "signetctl status": an object's state on both sides.
func statusCommand() *cobra.Command {
	return groupCommand("status", "Show a CSR's or PodCertificateRequest's state: conditions, Events and the server's ledger records (csr, pcr)",
		`Shows where a request stands, on both sides: the object's conditions and certificate and the
Events about it (from the cluster, with --kubeconfig or the default kubeconfig), and the
server's ledger records for its UID (LedgerService.FindRecords: the records of this client's
own calls, or every record of the signers it administers). Without connection settings the
ledger part is skipped, with a note.`,
		`  signetctl status csr csr-7xk2p --dev-state-dir .signet-dev
  signetctl status pcr default/web-0-cert-1 -o yaml`,
		statusKindCommand("csr", "CSR_NAME", "CertificateSigningRequest"),
		statusKindCommand("pcr", "NAMESPACE/NAME", "PodCertificateRequest"))
}

// statusKindCommand is "signetctl status csr" or "status pcr".
func statusKindCommand(use, arg, kind string) *cobra.Command {
	var kubeconfig, kubeCtx string
	cmd := &cobra.Command{
		Use:   use + " " + arg,
		Short: "Show a " + kind + "'s conditions, certificate, Events and ledger records",
		Long: `Shows the ` + kind + `'s signer, requester, state (pending, approved, issued, denied,
failed), conditions, certificate, the Events about it, and the server's ledger records for its
UID. Exit 0 when shown (whatever its state), 1 when it does not exist or the server refuses
the ledger lookup, 2 on a usage error or when the cluster or the server does not answer.

` + exitCodesHelp,
		Example: "  signetctl status " + use + " " + map[string]string{"csr": "csr-7xk2p", "pcr": "default/web-0-cert-1"}[use] + " --kubeconfig ~/.kube/config --dev-state-dir .signet-dev",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig `path` (default: $KUBECONFIG, else ~/.kube/config)")
	cmd.Flags().StringVar(&kubeCtx, "context", "", "kubeconfig `context` (default: the current context)")
	_ = cmd.MarkFlagFilename("kubeconfig")
	conn := addConnFlags(cmd)
	out := addOutputFlag(cmd, "the object's state, Events and ledger records")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		askLedger, err := conn.resolveOptional()
		if err != nil {
			return err
		}
		cs, err := kubeClient(kubeconfig, kubeCtx)
		if err != nil {
			return inputError("%v", err)
		}
		ctx, cancel := conn.callContext(cmd.Context())
		defer cancel()
		var st objectStatus
		if use == "csr" {
			st, err = csrStatus(ctx, cs, args[0])
		} else {
			st, err = pcrStatus(ctx, cs, args[0])
		}
		if err != nil {
			return err
		}
		st.Events = objectEvents(ctx, cs, st)
		var ledgerErr error
		if askLedger {
			ledgerErr = findRecords(cmd.Context(), conn, &st)
		} else {
			st.Ledger.Note = "not asked: no connection settings for signet-server (see 'signetctl help connection')"
		}
		w := cmd.OutOrStdout()
		if !out.text() {
			if err := out.print(w, st); err != nil {
				return err
			}
		} else {
			writeStatus(w, st)
		}
		return ledgerErr
	}
	return cmd
}

// kubeClient builds a clientset from the kubeconfig at path (the default loading rules when
// empty) and context kubeCtx (the current one when empty).
func kubeClient(path, kubeCtx string) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeCtx}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}

// kubeError is the exit of a failed read from the cluster: 1 for an object that does not
// exist, 2 otherwise.
func kubeError(what string, err error) error {
	if apierrors.IsNotFound(err) {
		return failure("%s not found", what)
	}
	return inputError("reading %s: %v", what, err)
}

// csrStatus reads the CertificateSigningRequest name.
func csrStatus(ctx context.Context, cs kubernetes.Interface, name string) (objectStatus, error) {
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return objectStatus{}, kubeError("CertificateSigningRequest "+name, err)
	}
	st := objectStatus{Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1", Name: csr.Name, UID: string(csr.UID),
		SignerName: csr.Spec.SignerName, Created: csr.CreationTimestamp.UTC(), Requester: csr.Spec.Username, Conditions: []conditionView{}}
	if g := csr.Spec.Groups; len(g) > 0 {
		st.Requester += " (groups " + strings.Join(g, ", ") + ")"
	}
	var types []string
	for _, c := range csr.Status.Conditions {
		t := c.LastUpdateTime.Time
		if t.IsZero() {
			t = c.LastTransitionTime.Time
		}
		st.Conditions = append(st.Conditions, conditionView{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message, Time: t.UTC()})
		if c.Status == corev1.ConditionTrue {
			types = append(types, string(c.Type))
		}
	}
	st.Certificate = leafOf(csr.Status.Certificate)
	switch {
	case slices.Contains(types, string(certificatesv1.CertificateDenied)):
		st.State = "denied"
	case slices.Contains(types, string(certificatesv1.CertificateFailed)):
		st.State = "failed"
	case len(csr.Status.Certificate) > 0:
		st.State = "issued"
	case slices.Contains(types, string(certificatesv1.CertificateApproved)):
		st.State = "approved, waiting for the signer"
	default:
		st.State = "pending approval"
	}
	return st, nil
}

// pcrStatus reads the PodCertificateRequest ns/name, as certificates.k8s.io/v1 when the
// cluster serves it, else v1beta1.
func pcrStatus(ctx context.Context, cs kubernetes.Interface, ref string) (objectStatus, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return objectStatus{}, usageError(nil, "%q is not NAMESPACE/NAME", ref)
	}
	what := "PodCertificateRequest " + ref
	st := objectStatus{Kind: "PodCertificateRequest", Namespace: ns, Conditions: []conditionView{}}
	var (
		meta    metav1.ObjectMeta
		conds   []metav1.Condition
		chain   string
		podDesc string
	)
	if servesV1PCR(cs) {
		pcr, err := cs.CertificatesV1().PodCertificateRequests(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return st, kubeError(what, err)
		}
		st.APIVersion, meta, conds, chain = "certificates.k8s.io/v1", pcr.ObjectMeta, pcr.Status.Conditions, pcr.Status.CertificateChain
		st.SignerName = pcr.Spec.SignerName
		podDesc = fmt.Sprintf("pod %s/%s (service account %s) on node %s", ns, pcr.Spec.PodName, pcr.Spec.ServiceAccountName, pcr.Spec.NodeName)
	} else {
		pcr, err := cs.CertificatesV1beta1().PodCertificateRequests(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return st, kubeError(what, err)
		}
		st.APIVersion, meta, conds, chain = "certificates.k8s.io/v1beta1", pcr.ObjectMeta, pcr.Status.Conditions, pcr.Status.CertificateChain
		st.SignerName = pcr.Spec.SignerName
		podDesc = fmt.Sprintf("pod %s/%s (service account %s) on node %s", ns, pcr.Spec.PodName, pcr.Spec.ServiceAccountName, pcr.Spec.NodeName)
	}
	st.Name, st.UID, st.Created, st.Requester = meta.Name, string(meta.UID), meta.CreationTimestamp.UTC(), podDesc
	st.State = "pending"
	for _, c := range conds {
		st.Conditions = append(st.Conditions, conditionView{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Time: c.LastTransitionTime.UTC()})
		if c.Status == metav1.ConditionTrue {
			st.State = strings.ToLower(c.Type)
		}
	}
	st.Certificate = leafOf([]byte(chain))
	return st, nil
}

// servesV1PCR reports whether the cluster serves PodCertificateRequests as
// certificates.k8s.io/v1 (Kubernetes 1.37 on); v1beta1 otherwise.
func servesV1PCR(cs kubernetes.Interface) bool {
	list, err := cs.Discovery().ServerResourcesForGroupVersion(certificatesv1.SchemeGroupVersion.String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == "podcertificaterequests" {
			return true
		}
	}
	return false
}

// leafOf describes the first certificate of a PEM chain; nil when there is none.
func leafOf(chain []byte) *described {
	block, _ := pem.Decode(chain)
	if block == nil {
		return nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}
	d := describeCert(cert, time.Now())
	d.Source, d.Index = "status", 1
	return &d
}

// objectEvents lists the Events about st's object (in its namespace; "default" for a
// cluster-scoped CertificateSigningRequest), oldest first. A failed list is shown as a note
// event rather than failing the command.
func objectEvents(ctx context.Context, cs kubernetes.Interface, st objectStatus) []eventView {
	ns := st.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", st.UID).String(),
	})
	if err != nil {
		return []eventView{{Type: "Unknown", Reason: "EventsNotListed", Message: err.Error()}}
	}
	events := []eventView{}
	for _, e := range list.Items {
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if t.IsZero() {
			t = e.CreationTimestamp.Time
		}
		events = append(events, eventView{Time: t.UTC(), Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count,
			Source: cmpOr(e.Source.Component, e.ReportingController)})
	}
	slices.SortStableFunc(events, func(a, b eventView) int { return a.Time.Compare(b.Time) })
	return events
}

// cmpOr is the first non-empty string.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// findRecords asks the server for the ledger records of st's UID; a failed call is noted in
// st.Ledger and returned as an exit error.
func findRecords(ctx context.Context, conn *connFlags, st *objectStatus) error {
	st.Ledger = ledgerView{Server: conn.settings.server, Records: []ledger.Record{}}
	cc, err := conn.dial()
	if err != nil {
		st.Ledger.Note = "not asked: " + err.Error()
		return err
	}
	defer cc.Close()
	callCtx, cancel := conn.callContext(ctx)
	defer cancel()
	resp, err := signetv1.NewLedgerServiceClient(cc).FindRecords(callCtx, &signetv1.FindRecordsRequest{ObjectUid: st.UID})
	if err != nil {
		ee := conn.callError(err)
		st.Ledger.Note = "not available: " + ee.Error()
		var exit *exitError
		if errors.As(ee, &exit) {
			exit.msg = "the server's ledger records: " + exit.msg
		}
		return ee
	}
	for _, r := range resp.GetRecords() {
		st.Ledger.Records = append(st.Ledger.Records, recordFromProto(r))
	}
	if len(st.Ledger.Records) == 0 {
		st.Ledger.Note = "no record this client may see: the server has not decided on it yet, or the call was another client's"
	}
	return nil
}

// recordFromProto is a LedgerRecord of the wire as a ledger.Record, for the same output as
// ledger list and show.
func recordFromProto(r *signetv1.LedgerRecord) ledger.Record {
	at := func(ts interface{ AsTime() time.Time }, set bool) time.Time {
		if !set {
			return time.Time{}
		}
		return ts.AsTime().UTC()
	}
	return ledger.Record{
		Seq: r.GetSeq(), Time: at(r.GetTime(), r.GetTime() != nil), Decision: ledger.Decision(r.GetDecision()), Signer: r.GetSigner(),
		Client: r.GetClient(), Requester: r.GetRequester(), ObjectUID: r.GetObjectUid(), ObjectKind: r.GetObjectKind(),
		Serial: r.GetSerialNumber(), NotBefore: at(r.GetNotBefore(), r.GetNotBefore() != nil), NotAfter: at(r.GetNotAfter(), r.GetNotAfter() != nil),
		Reason: r.GetReason(), Message: r.GetMessage(), Grounds: r.GetGrounds(), Certificate: r.GetCertificateChainPem(), Hash: r.GetHash(),
	}
}

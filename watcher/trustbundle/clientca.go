package trustbundle

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/watcher/kubeclient"
)

// Where the API server publishes the client CAs it trusts (its --client-ca-file).
const (
	AuthenticationConfigMap = "extension-apiserver-authentication"
	AuthenticationNamespace = "kube-system"
	ClientCAKey             = "client-ca-file"
)

// SourceReporter reports a bundle from another source than the signer's ClusterTrustBundle
// (*signerclient.Client).
type SourceReporter interface {
	ReportTrustSource(ctx context.Context, signerName, cluster, source, bundleHash string, fingerprints []string) error
}

// errNoClientCA is the failure of a ConfigMap without client CAs.
var errNoClientCA = errors.New("the ConfigMap has no certificate under " + ClientCAKey + " (is the API server started with --client-ca-file?)")

// clientCA reads the API server's client CAs, for the signers whose trust lives there.
type clientCA struct {
	kube kubeclient.Interface
	// failing remembers the last failure, so that a failure that lasts is logged once.
	failing string
}

// reportClientCA reports, for a signer whose trust lives in the API server's client-ca-file
// (signetv1.TrustSource), that file as the API server publishes it: the client CAs of the
// ConfigMap kube-system/extension-apiserver-authentication. That is what the rotation gate of
// the kubernetes.io client signers waits for, since a ClusterTrustBundle changes nothing the
// API server trusts. It needs get on that ConfigMap (the Role
// extension-apiserver-authentication-reader in kube-system grants it). Failures are logged,
// once while they last, and retried every period.
func (p *Publisher) reportClientCA(ctx context.Context, logger klog.Logger, signer string) {
	sr, ok := p.reporter.(SourceReporter)
	if !ok || p.clientCA == nil || signetv1.TrustSource(signer) != signetv1.TrustSourceAPIServerClientCA {
		return
	}
	fail := func(what string, err error) {
		if p.clientCA.failing == what {
			logger.V(1).Info("Reporting the API server's client CAs still fails", "step", what, "err", err)
			return
		}
		p.clientCA.failing = what
		logger.Error(err, "Reporting the API server's client CAs failed: a staged CA of this signer is not activated before it works; retrying every period",
			"step", what, "configMap", AuthenticationNamespace+"/"+AuthenticationConfigMap)
	}
	cm, err := p.clientCA.kube.CoreV1().ConfigMaps(AuthenticationNamespace).Get(ctx, AuthenticationConfigMap, metav1.GetOptions{})
	if err != nil {
		fail("read", err)
		return
	}
	hash, fingerprints := Digest(cm.Data[ClientCAKey])
	if len(fingerprints) == 0 {
		fail("parse", errNoClientCA)
		return
	}
	if err := sr.ReportTrustSource(ctx, signer, p.cluster, signetv1.TrustSourceAPIServerClientCA, hash, fingerprints); err != nil {
		fail("report", err)
		return
	}
	if p.clientCA.failing != "" {
		p.clientCA.failing = ""
		logger.Info("Reporting the API server's client CAs works again")
	}
	logger.V(4).Info("Reported the API server's client CAs to the signing server", "anchors", len(fingerprints))
}

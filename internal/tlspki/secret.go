package tlspki

import (
	"crypto/x509"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/keystore/pemfile"
)

// SecretCAKey is the Secret's key of the server CA (the watcher's server.caFile
// /etc/signet/tls/ca.crt), next to tls.crt and tls.key.
const SecretCAKey = "ca.crt"

// Annotations of the watcher's Secret, for people reading it in the cluster.
const (
	AnnotationIdentity = "signet.dev/client-identity"
	AnnotationNotAfter = "signet.dev/client-certificate-not-after"
)

// WatcherSecret is the manifest of the Secret the watcher mounts at /etc/signet/tls (type
// kubernetes.io/tls): tls.crt and tls.key are watcher's certificate and private key, ca.crt
// the server CA that verifies the signing server (the watcher's server.caFile). It holds the
// private key in the clear (base64 is no protection).
func WatcherSecret(ref SecretRef, watcher *KeyPair, serverCA *x509.Certificate) ([]byte, error) {
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(watcher.Key)
	if err != nil {
		return nil, fmt.Errorf("making the watcher's Secret: %w", err)
	}
	annotations := map[string]string{AnnotationNotAfter: watcher.Cert.NotAfter.UTC().Format(time.RFC3339)}
	if len(watcher.Cert.URIs) > 0 {
		annotations[AnnotationIdentity] = watcher.Cert.URIs[0].String()
	}
	s := corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace, Annotations: annotations},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       CertPEM(watcher.Cert),
			corev1.TLSPrivateKeyKey: keyPEM,
			SecretCAKey:             CertPEM(serverCA),
		},
	}
	out, err := yaml.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("making the watcher's Secret: %w", err)
	}
	return append([]byte("# The watcher's mTLS Secret. It holds the watcher's PRIVATE KEY: keep it out of git and logs.\n"), out...), nil
}

// ReadWatcherSecret makes the watcher's Secret from the files in dir: the record's
// namespace and name, the watcher's certificate and key, the server CA.
func ReadWatcherSecret(dir string) ([]byte, error) {
	rec, _, err := ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	watcher, err := readPair(dir, WatcherCert, WatcherKey)
	if err != nil {
		return nil, err
	}
	serverCA, err := ReadCertificate(filepath.Join(dir, ServerCACert))
	if err != nil {
		return nil, err
	}
	return WatcherSecret(rec.WatcherSecret, watcher, serverCA)
}

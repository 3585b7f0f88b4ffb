package tlspki

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/internal/configfile"
	"github.com/signet-pki/signet/keystore/pemfile"
)

// The header of RecordFile.
const (
	recordAPIVersion = "signet.dev/v1alpha1"
	recordKind       = "TLSPKIRecord"
)

// Record is RecordFile: what pki renew needs that the certificates do not say.
type Record struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Cluster is the watcher's clusterName.
	Cluster string `json:"cluster"`
	// WatcherSecret is where the watcher's Secret goes.
	WatcherSecret SecretRef `json:"watcherSecret"`
}

// SecretRef names a Secret.
type SecretRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// newRecord is the record of a new PKI.
func newRecord(cluster, namespace, name string) Record {
	return Record{APIVersion: recordAPIVersion, Kind: recordKind, Cluster: cluster,
		WatcherSecret: SecretRef{Namespace: namespace, Name: name}}
}

// ReadRecord reads RecordFile in dir. A folder without one (made before the record existed,
// or by hand with the same file names) gets the defaults and found false.
func ReadRecord(dir string) (rec Record, found bool, err error) {
	path := filepath.Join(dir, RecordFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return newRecord(DefaultCluster, DefaultNamespace, DefaultSecretName), false, nil
	}
	if err := configfile.Decode(path, recordAPIVersion, recordKind, &rec); err != nil {
		return Record{}, false, err
	}
	return rec, true, nil
}

// file is one file of the PKI folder.
type file struct {
	name string
	data []byte
	mode os.FileMode
}

// files lists the folder's files with their contents: certificates 0644, keys 0600, the
// record last.
func (p *PKI) files() ([]file, error) {
	var out []file
	for _, f := range []struct {
		pair      *KeyPair
		cert, key string
	}{
		{p.ServerCA, ServerCACert, ServerCAKey},
		{p.ClientCA, ClientCACert, ClientCAKey},
		{p.Server, ServerCert, ServerKey},
		{p.Watcher, WatcherCert, WatcherKey},
	} {
		keyPEM, err := pemfile.MarshalPrivateKeyPEM(f.pair.Key)
		if err != nil {
			return nil, err
		}
		out = append(out, file{f.key, keyPEM, 0o600}, file{f.cert, CertPEM(f.pair.Cert), 0o644})
	}
	rec, err := yaml.Marshal(p.Record)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", RecordFile, err)
	}
	header := "# Written by signetctl pki init, read by signetctl pki renew. No secrets in here.\n"
	return append(out, file{RecordFile, append([]byte(header), rec...), 0o644}), nil
}

// Files are the names of every file Write writes.
func Files() []string {
	return []string{ServerCAKey, ServerCACert, ClientCAKey, ClientCACert, ServerKey, ServerCert, WatcherKey, WatcherCert, RecordFile}
}

// Write writes the PKI into dir, created with mode 0700 if missing. Unless force, it
// refuses (ErrExist, naming them) when any of its files exists, before writing anything.
func (p *PKI) Write(dir string, force bool) error {
	files, err := p.files()
	if err != nil {
		return err
	}
	if !force {
		var names []string
		for _, f := range files {
			names = append(names, filepath.Join(dir, f.name))
		}
		found, err := Existing(names...)
		if err != nil {
			return err
		}
		if len(found) > 0 {
			return fmt.Errorf("%w: %s", ErrExist, strings.Join(found, ", "))
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the PKI folder: %w", err)
	}
	for _, f := range files {
		if err := atomicfile.Write(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// Existing returns those of paths that exist.
func Existing(paths ...string) ([]string, error) {
	var found []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			found = append(found, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("checking %s: %w", p, err)
		}
	}
	return found, nil
}

// CertPEM is cert as a PEM CERTIFICATE block.
func CertPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// ReadCertificate reads a PEM file holding exactly one certificate.
func ReadCertificate(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading certificate: %w", err)
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%s does not hold exactly one CERTIFICATE block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate %s: %w", path, err)
	}
	return cert, nil
}

// readPair reads the certificate and key files certName and keyName in dir and checks that
// the key is the certificate's. The key file must be readable by its owner only.
func readPair(dir, certName, keyName string) (*KeyPair, error) {
	cert, err := ReadCertificate(filepath.Join(dir, certName))
	if err != nil {
		return nil, err
	}
	key, err := pemfile.Open(filepath.Join(dir, keyName), pemfile.Options{})
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of %s", filepath.Join(dir, keyName), filepath.Join(dir, certName))
	}
	return &KeyPair{Cert: cert, Key: key.Signer}, nil
}

package leader

import (
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// ServiceAccountNamespaceFile holds the namespace of the pod's service account in a pod.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Environment variables read by Namespace and Identity, set from the downward API.
const (
	EnvPodNamespace = "POD_NAMESPACE"
	EnvPodName      = "POD_NAME"
)

// Env is what Namespace and Identity read from the process: the real one is ProcessEnv.
type Env struct {
	// Getenv looks up an environment variable.
	Getenv func(string) string
	// ReadFile reads a file.
	ReadFile func(string) ([]byte, error)
	// Hostname returns the host name.
	Hostname func() (string, error)
	// Rand supplies the random suffix of an identity.
	Rand io.Reader
}

// Namespace returns the namespace of the Lease: explicit if set, else $POD_NAMESPACE, else
// the pod's service-account namespace file. It is an error when none is found: the Lease is
// never put in a namespace the watcher was not deployed to (such as kube-system).
func (e Env) Namespace(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if ns := strings.TrimSpace(e.Getenv(EnvPodNamespace)); ns != "" {
		return ns, nil
	}
	data, err := e.ReadFile(ServiceAccountNamespaceFile)
	if ns := strings.TrimSpace(string(data)); err == nil && ns != "" {
		return ns, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("leader election namespace: reading %s: %w", ServiceAccountNamespaceFile, err)
	}
	return "", fmt.Errorf("leader election namespace: not configured, $%s is empty and %s is missing (set leaderElection.namespace)",
		EnvPodNamespace, ServiceAccountNamespaceFile)
}

// Identity returns this candidate's holder identity: explicit if set, else $POD_NAME, else
// the host name and "_" and 8 random hex digits, so that two processes on one host differ.
func (e Env) Identity(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if name := strings.TrimSpace(e.Getenv(EnvPodName)); name != "" {
		return name, nil
	}
	host, err := e.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	suffix := make([]byte, 4)
	if _, err := io.ReadFull(e.Rand, suffix); err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	return host + "_" + hex.EncodeToString(suffix), nil
}

// ProcessEnv is the Env of this process, with crypto/rand for randomness.
func ProcessEnv() Env {
	return Env{Getenv: os.Getenv, ReadFile: os.ReadFile, Hostname: os.Hostname, Rand: cryptorand.Reader}
}

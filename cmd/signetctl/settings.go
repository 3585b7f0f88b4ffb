package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/configfile"
	"github.com/signet-pki/signet/internal/devpki"
)

// The environment variables of the connection settings.
const (
	envServer      = "SIGNET_SERVER"
	envServerName  = "SIGNET_SERVER_NAME"
	envTLSCA       = "SIGNET_TLS_CA"
	envTLSCert     = "SIGNET_TLS_CERT"
	envTLSKey      = "SIGNET_TLS_KEY"
	envDevStateDir = "SIGNET_DEV_STATE_DIR"
	envTimeout     = "SIGNET_TIMEOUT"
	envConfig      = "SIGNETCTL_CONFIG"
)

// The config file's apiVersion and kind.
const (
	settingsAPIVersion = "signet.dev/v1alpha1"
	settingsKind       = "SignetctlConfiguration"
)

// defaultConfigHint names the default config file in help texts.
const defaultConfigHint = "$XDG_CONFIG_HOME/signet/signetctl.yaml, else ~/.config/signet/signetctl.yaml"

// connSettings are the settings of a connection to signet-server; an empty field is unset.
type connSettings struct {
	server, serverName, tlsCA, tlsCert, tlsKey string
	timeout                                    time.Duration
}

// expandDevDir fills the TLS files left empty from a 'signet-server --dev' state folder dir
// (nothing when dir is empty): within one source, explicit files win over its folder.
func (s *connSettings) expandDevDir(dir string) {
	if dir == "" {
		return
	}
	for _, f := range []struct {
		v    *string
		name string
	}{{&s.tlsCA, devpki.TLSCACert}, {&s.tlsCert, devpki.ClientCert}, {&s.tlsKey, devpki.ClientKey}} {
		if *f.v == "" {
			*f.v = filepath.Join(dir, f.name)
		}
	}
}

// merge takes each setting from the first layer that sets it.
func merge(layers ...connSettings) connSettings {
	var out connSettings
	for _, l := range layers {
		out.server = cmp.Or(out.server, l.server)
		out.serverName = cmp.Or(out.serverName, l.serverName)
		out.tlsCA = cmp.Or(out.tlsCA, l.tlsCA)
		out.tlsCert = cmp.Or(out.tlsCert, l.tlsCert)
		out.tlsKey = cmp.Or(out.tlsKey, l.tlsKey)
		out.timeout = cmp.Or(out.timeout, l.timeout)
	}
	return out
}

// settingsFromEnv reads the SIGNET_* environment variables.
func settingsFromEnv() (connSettings, error) {
	s := connSettings{
		server:     os.Getenv(envServer),
		serverName: os.Getenv(envServerName),
		tlsCA:      os.Getenv(envTLSCA),
		tlsCert:    os.Getenv(envTLSCert),
		tlsKey:     os.Getenv(envTLSKey),
	}
	if v := os.Getenv(envTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("%s=%q is not a positive duration (e.g. 10s)", envTimeout, v)
		}
		s.timeout = d
	}
	s.expandDevDir(os.Getenv(envDevStateDir))
	return s, nil
}

// settingsFile is the config file of signetctl's connection settings.
type settingsFile struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Server     settingsServer `json:"server"`
	// Timeout bounds each call to the server.
	Timeout metav1.Duration `json:"timeout,omitempty"`
}

// settingsServer is how to reach the server; relative paths are relative to the file's folder.
type settingsServer struct {
	Address     string `json:"address,omitempty"`
	ServerName  string `json:"serverName,omitempty"`
	CAFile      string `json:"caFile,omitempty"`
	CertFile    string `json:"certFile,omitempty"`
	KeyFile     string `json:"keyFile,omitempty"`
	DevStateDir string `json:"devStateDir,omitempty"`
}

// settingsFromFile reads the config file: path (--config), else $SIGNETCTL_CONFIG, else the
// default file. A file named by --config or the environment must exist; the default one may
// not.
func settingsFromFile(path string) (connSettings, error) {
	explicit := cmp.Or(path, os.Getenv(envConfig))
	path = explicit
	if path == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			return connSettings{}, nil
		}
		path = filepath.Join(dir, "signet", "signetctl.yaml")
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return connSettings{}, nil
		}
	}
	var f settingsFile
	if err := configfile.Decode(path, settingsAPIVersion, settingsKind, &f); err != nil {
		return connSettings{}, fmt.Errorf("connection settings file: %w", err)
	}
	if f.Timeout.Duration < 0 {
		return connSettings{}, fmt.Errorf("connection settings file %s: timeout %s is negative", path, f.Timeout.Duration)
	}
	srv := f.Server
	dir := filepath.Dir(path)
	configfile.ResolvePaths(dir, &srv.CAFile, &srv.CertFile, &srv.KeyFile, &srv.DevStateDir)
	s := connSettings{server: srv.Address, serverName: srv.ServerName, tlsCA: srv.CAFile, tlsCert: srv.CertFile,
		tlsKey: srv.KeyFile, timeout: f.Timeout.Duration}
	s.expandDevDir(srv.DevStateDir)
	return s, nil
}

// connectionHelpTopic is 'signetctl help connection'.
func connectionHelpTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "connection",
		Short: "How commands that call the server find it: flags, environment, config file",
		Long: `Commands that call signet-server (signers, explain, health, trust, ca stage|activate|retire|status)
take each connection setting from the first of:

  1. its flag: --server, --server-name, --tls-ca, --tls-cert, --tls-key, --timeout, or
     --dev-state-dir DIR (the TLS files of a 'signet-server --dev' state folder, for the ones not
     given by their own flag);
  2. its environment variable: ` + envServer + `, ` + envServerName + `, ` + envTLSCA + `, ` + envTLSCert + `,
     ` + envTLSKey + `, ` + envTimeout + `, or ` + envDevStateDir + `;
  3. the config file: --config FILE, else $` + envConfig + `, else
     ` + defaultConfigHint + ` when it exists;
  4. the default: server ` + defaultServer + `, timeout ` + defaultTimeout.String() + `.

Mutual TLS is always on: the CA, the client certificate and its key must come from one of them.

The config file (relative paths are relative to its folder):

  apiVersion: ` + settingsAPIVersion + `
  kind: ` + settingsKind + `
  server:
    address: signet.example.com:8443
    serverName: signet.example.com     # optional: the name in the server's certificate
    caFile: tls-ca.crt
    certFile: admin.crt
    keyFile: admin.key
    # devStateDir: /path/to/.signet-dev  (instead of the three files)
  timeout: 10s`,
	}
}

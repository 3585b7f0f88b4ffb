package configcheck_test

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/youmark/pkcs8"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/configcheck"
)

// devState writes a dev state and returns its loaded configuration and folder.
func devState(t *testing.T) (*config.Config, string) {
	t.Helper()
	dir := t.TempDir()
	path, err := devpki.Ensure(devpki.Options{Dir: dir, PodIdentitySigner: devpki.DefaultPodIdentitySigner})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, dir
}

func write(t *testing.T, path string, data []byte, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFiles: each file problem a start would run into is reported under its field, and a
// configuration whose files are fine has none.
func TestFiles(t *testing.T) {
	t.Parallel()
	in := func(dir, name string) string { return filepath.Join(dir, name) }
	rsaKey := func(t *testing.T, dir string) string {
		return write(t, in(dir, "rsa.key"), testpki.KeyPEM(t, testpki.Key(t, testpki.RSA2048)), 0o600)
	}
	encrypted := func(t *testing.T, dir string) string {
		data, err := os.ReadFile(in(dir, devpki.SignerCAKey))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		der, err := pkcs8.MarshalPrivateKey(key, []byte("secret"), &pkcs8.Opts{
			Cipher: pkcs8.AES256CBC, KDFOpts: pkcs8.PBKDF2Opts{SaltSize: 16, IterationCount: 1000, HMACHash: crypto.SHA256},
		})
		if err != nil {
			t.Fatal(err)
		}
		return write(t, in(dir, "encrypted.key"), pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}), 0o600)
	}
	tests := []struct {
		name  string
		spoil func(t *testing.T, cfg *config.Config, dir string)
		want  []string // each a problem's start; none for a fine configuration
	}{
		{"the dev state", func(*testing.T, *config.Config, string) {}, nil},
		{"TLS key of another certificate", func(t *testing.T, cfg *config.Config, dir string) { cfg.TLS.KeyFile = in(dir, devpki.SignerCAKey) },
			[]string{"tls.keyFile: "}},
		{"client CA file that holds no certificate", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.TLS.ClientCAFile = write(t, in(dir, "empty.crt"), []byte("nothing\n"), 0o644)
		}, []string{"tls.clientCAFile: "}},
		{"CA file with two certificates", func(t *testing.T, cfg *config.Config, dir string) {
			a, b := testpki.CA(t), testpki.CA(t)
			cfg.Signers[0].Certificate = write(t, in(dir, "two.crt"), append(a.CertPEM(), b.CertPEM()...), 0o644)
		}, []string{"signers[0].certificate: "}},
		{"intermediates that do not parse", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Signers[1].Intermediates = write(t, in(dir, "chain.pem"), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o644)
		}, []string{"signers[1].intermediates: "}},
		{"encrypted key without its passphrase file", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Signers[0].Key = encrypted(t, dir)
		}, []string{"signers[0].key: key file "}},
		{"encrypted key with its passphrase file", func(t *testing.T, cfg *config.Config, dir string) {
			pass := write(t, in(dir, "pass"), []byte("secret\n"), 0o600)
			cfg.Signers[0].Key = "file://" + encrypted(t, dir) + "?passphrase-file=" + pass
		}, nil},
		{"passphrase file group may read", func(t *testing.T, cfg *config.Config, dir string) {
			pass := write(t, in(dir, "pass"), []byte("secret\n"), 0o640)
			cfg.Signers[0].Key = "file://" + encrypted(t, dir) + "?passphrase-file=" + pass
		}, []string{"signers[0].key: "}},
		{"unknown key scheme", func(t *testing.T, cfg *config.Config, _ string) { cfg.Signers[0].Key = "vault:transit/ca" }, []string{"signers[0].key: "}},
		{"PKCS#11 without module", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Signers[0].Key = "pkcs11:token=signet;object=ca?pin-source=file:" + in(dir, devpki.ConfigFile)
		}, []string{"signers[0].key: module-path is missing"}},
		{"PKCS#11 module and PIN file missing", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Signers[0].Key = "pkcs11:token=signet;object=ca?module-path=" + in(dir, "none.so") + "&pin-source=file:" + in(dir, "none.pin")
		}, []string{"signers[0].key module-path: ", "signers[0].key pin-source: "}},
		{"PKCS#11 PIN in the URI", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Signers[0].Key = "pkcs11:token=signet;object=ca?module-path=" + in(dir, devpki.ConfigFile) + "&pin-value=1234"
		}, []string{"signers[0].key: pin-value"}},
		{"PKCS#11 PIN in the URI, allowed", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Keys.AllowPINValue = true
			cfg.Signers[0].Key = "pkcs11:token=signet;object=ca?module-path=" + in(dir, devpki.ConfigFile) + "&pin-value=1234"
		}, nil},
		{"TPM handle", func(t *testing.T, cfg *config.Config, _ string) { cfg.Signers[0].Key = "tpm:handle=0x81000001" }, nil},
		{"TPM blob missing", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Signers[0].Key = "tpm:blob=" + in(dir, "none.blob")
		},
			[]string{"signers[0].key blob: "}},
		{"checkpoint key of the wrong type", func(t *testing.T, cfg *config.Config, dir string) { cfg.Ledger.Checkpoint.Key = rsaKey(t, dir) },
			[]string{"ledger.checkpoint.key: "}},
		{"witnessed checkpoint missing", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Ledger.Checkpoint.WitnessedFile = in(dir, "witnessed")
		}, []string{"ledger.checkpoint.witnessedFile: "}},
		{"ledger.dir is a file", func(t *testing.T, cfg *config.Config, dir string) { cfg.Ledger.Dir = in(dir, devpki.ConfigFile) },
			[]string{"ledger.dir: "}},
		{"ledger.dir under a file", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Ledger.Dir = in(dir, devpki.ConfigFile+"/a/ledger")
		},
			[]string{"ledger.dir: "}},
		{"ledger.dir to create", func(t *testing.T, cfg *config.Config, dir string) { cfg.Ledger.Dir = in(dir, "var/lib/ledger") }, nil},
		{"retired CA without its key", func(t *testing.T, cfg *config.Config, dir string) {
			s := &cfg.Signers[0]
			s.CAs = []config.CA{{Key: s.Key, Certificate: s.Certificate}, {Key: in(dir, "gone.key"), Certificate: in(dir, devpki.PodIdentityCACert), State: config.StateRetired}}
			s.Key, s.Certificate = "", ""
		}, nil},
		{"attestation files missing", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Attestation = config.Attestation{Address: "127.0.0.1:0", EKRootsFile: in(dir, "roots.pem"), EKAllowListFile: in(dir, "allow.txt"),
				BootState: &config.BootState{PCRs: []int{7}, ReferenceFile: in(dir, "refs.yaml")}}
		}, []string{"attestation.ekRootsFile: ", "attestation.ekAllowListFile: ", "attestation.bootState.referenceFile: "}},
		{"short ticket key", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Attestation = config.Attestation{Address: "127.0.0.1:0", EKAllowListFile: write(t, in(dir, "allow.txt"), []byte("# none\n"), 0o644),
				TicketKeyFile: write(t, in(dir, "ticket.key"), []byte("short"), 0o600)}
		}, []string{"attestation.ticketKeyFile: "}},
		{"fleet password file missing", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.State = config.State{Backend: config.BackendPostgres, Postgres: config.Postgres{DSN: "postgres://db/s", PasswordFile: in(dir, "pg.pass")}}
		}, []string{"state.postgres.passwordFile: "}},
		{"allow-list that is not one", func(t *testing.T, cfg *config.Config, dir string) {
			cfg.Attestation = config.Attestation{Address: "127.0.0.1:0", EKAllowListFile: write(t, in(dir, "allow.txt"), []byte("abc\n"), 0o644)}
		}, []string{"attestation.ekAllowListFile: "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, dir := devState(t)
			tc.spoil(t, cfg, dir)
			problems, notes := configcheck.Files(cfg)
			if len(notes) != 0 {
				t.Errorf("notes %q", notes)
			}
			if len(problems) != len(tc.want) {
				t.Errorf("%d problems, want %d: %q", len(problems), len(tc.want), problems)
			}
			for _, w := range tc.want {
				found := false
				for _, p := range problems {
					found = found || strings.HasPrefix(p.Error(), w) || strings.Contains(p.Error(), w)
				}
				if !found {
					t.Errorf("no problem starting with %q in %q", w, problems)
				}
			}
		})
	}
}

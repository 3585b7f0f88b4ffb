package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/internal/version"
)

// serverVersionUnavailable says why version shows no server build.
const serverVersionUnavailable = "not available: signet-server does not report its build over its API " +
	"(see its --version, or the signet_server_build_info metric)"

// versionReport is version's answer (-o json|yaml).
type versionReport struct {
	Client     version.Info  `json:"client"`
	Server     *version.Info `json:"server"`
	ServerNote string        `json:"serverNote,omitempty"`
}

// versionCommand is "signetctl version".
func versionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show signetctl's build (version, commit, Go) and the server's where it is known",
		Long: `Shows the build of signetctl: its version (git describe), commit, commit date, Go version and
platform. signet-server does not report its build over its API yet, so the server's is shown as
not available; 'signet-server --version' on its host tells it. 'signetctl --version' prints the
client's line alone.

` + exitCodesHelp,
		Example: `  signetctl version
  signetctl version -o json`,
		Args: cobra.NoArgs,
	}
	out := addOutputFlag(cmd, "the client's build, and the server's (null)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		rep := versionReport{Client: version.Get(), ServerNote: serverVersionUnavailable}
		w := cmd.OutOrStdout()
		if !out.text() {
			return out.print(w, rep)
		}
		fmt.Fprintf(w, "client: %s\n", rep.Client)
		fmt.Fprintf(w, "server: %s\n", rep.ServerNote)
		return nil
	}
	return cmd
}

package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// statusNotOffered is the status health shows for a signer the server does not offer this
// client (the server reports its overall status under such a name, which would mislead).
const statusNotOffered = "NOT_OFFERED"

// healthReport is health's answer (-o json|yaml).
type healthReport struct {
	Server  string         `json:"server"`
	Healthy bool           `json:"healthy"`
	Overall serviceHealth  `json:"overall"`
	Signers []signerHealth `json:"signers"`
}

// serviceHealth is the status of one grpc.health.v1 service.
type serviceHealth struct {
	Service string `json:"service"`
	Status  string `json:"status"`
}

// signerHealth is the status of one signer.
type signerHealth struct {
	Signer string `json:"signer"`
	serviceHealth
}

// healthCommand is "signetctl health".
func healthCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "health [SIGNER...]",
		Short: "Ask whether the server, and each signer, is serving (gRPC health)",
		Long: `Asks the server's grpc.health.v1 service whether it serves (` + signetv1.HealthService + `: the ledger
accepts records and the server is not stopping) and whether each signer does
(` + signetv1.HealthService + `/SIGNER: its active CA key can sign). Without SIGNER: every signer
the server offers this client (ListSigners). A signer the server does not offer this client is
shown as ` + statusNotOffered + `.

Exit 0 when the server and every signer are SERVING, 1 otherwise, 2 on a usage error or no
answer.

` + exitCodesHelp,
		Example: `  signetctl health --dev-state-dir .signet-dev
  signetctl health example.com/serving -o json`,
	}
	conn := addConnFlags(cmd)
	cmd.ValidArgsFunction = completeSigners(conn)
	out := addOutputFlag(cmd, "the server's and each signer's status")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		cc, err := conn.dial()
		if err != nil {
			return err
		}
		defer cc.Close()
		rep, err := checkHealth(cmd.Context(), conn, cc, args)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if !out.text() {
			if err := out.print(w, rep); err != nil {
				return err
			}
		} else {
			writeHealth(w, rep)
		}
		if !rep.Healthy {
			return silentFailure()
		}
		return nil
	}
	return cmd
}

// checkHealth asks the overall status and each signer's (signers, else every signer
// ListSigners returns). A call that gets no answer is an exit error.
func checkHealth(ctx context.Context, conn *connFlags, cc *grpc.ClientConn, signers []string) (healthReport, error) {
	rep := healthReport{Server: conn.settings.server, Signers: []signerHealth{}}
	hc := healthpb.NewHealthClient(cc)
	overall, err := checkService(ctx, conn, hc, signetv1.HealthService)
	if err != nil {
		return rep, err
	}
	rep.Overall = serviceHealth{Service: signetv1.HealthService, Status: overall}
	listCtx, cancel := conn.callContext(ctx)
	listed, listErr := signetv1.NewSignerServiceClient(cc).ListSigners(listCtx, &signetv1.ListSignersRequest{})
	cancel()
	var offered []string
	for _, s := range listed.GetSigners() {
		offered = append(offered, s.GetSignerName())
	}
	switch {
	case listErr != nil && len(signers) == 0:
		return rep, conn.callError(listErr)
	case len(signers) == 0:
		signers = offered
	}
	rep.Healthy = overall == healthpb.HealthCheckResponse_SERVING.String()
	for _, name := range signers {
		sh := signerHealth{Signer: name, serviceHealth: serviceHealth{Service: signetv1.SignerHealthService(name)}}
		if listErr == nil && !slices.Contains(offered, name) {
			sh.Status = statusNotOffered
		} else if sh.Status, err = checkService(ctx, conn, hc, sh.Service); err != nil {
			return rep, err
		}
		rep.Healthy = rep.Healthy && sh.Status == healthpb.HealthCheckResponse_SERVING.String()
		rep.Signers = append(rep.Signers, sh)
	}
	return rep, nil
}

// checkService is the status of service: SERVING, NOT_SERVING, ..., or SERVICE_UNKNOWN when
// the server does not know it. Other failures are exit errors.
func checkService(ctx context.Context, conn *connFlags, hc healthpb.HealthClient, service string) (string, error) {
	ctx, cancel := conn.callContext(ctx)
	defer cancel()
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	switch {
	case status.Code(err) == codes.NotFound:
		return healthpb.HealthCheckResponse_SERVICE_UNKNOWN.String(), nil
	case err != nil:
		return "", conn.callError(err)
	}
	return resp.GetStatus().String(), nil
}

// writeHealth prints rep for people.
func writeHealth(w io.Writer, rep healthReport) {
	fmt.Fprintf(w, "server %s: %s\n", rep.Server, rep.Overall.Status)
	if len(rep.Signers) == 0 {
		fmt.Fprintln(w, "  no signers: the server offers this client none")
	}
	for _, s := range rep.Signers {
		fmt.Fprintf(w, "  %s: %s\n", s.Signer, s.Status)
	}
}

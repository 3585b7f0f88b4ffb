package watcher

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/watcher/csrsigner"
	"github.com/signet-pki/signet/watcher/signerclient"
)

// Run defaults and validates a copy of cfg, connects to the signing server, and runs the CSR
// signing controller until ctx is done. It returns nil after a clean stop and an error if the
// configuration is invalid, the client cannot be built, or the controller fails to start.
// Run holds no process-wide state, so a leader-election callback can call it per term.
func Run(ctx context.Context, cfg *Config, kube kubernetes.Interface, logger klog.Logger) error {
	c := *cfg
	c.Default()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("running watcher: invalid configuration: %w", err)
	}
	clk := clock.RealClock{}

	client, err := signerclient.New(c.signerClientConfig(clk, logger))
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	defer func() {
		if err := client.Close(); err != nil {
			logger.Error(err, "Closing signer client")
		}
	}()

	controller, err := csrsigner.New(kube, client, csrsigner.Options{
		SignerNames:    c.SignerNames,
		BackoffInitial: c.Backoff.Initial.Duration,
		BackoffMax:     c.Backoff.Max.Duration,
		Clock:          clk,
	})
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	logger.Info("Starting watcher", "server", c.Server.Address, "signerNames", c.SignerNames)
	if err := controller.Run(klog.NewContext(ctx, logger.WithName("csrsigner")), c.Workers); err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	return nil
}

// signerClientConfig is the signer client's part of the configuration.
func (c *Config) signerClientConfig(clk clock.PassiveClock, logger klog.Logger) signerclient.Config {
	return signerclient.Config{
		Address:    c.Server.Address,
		CAFile:     c.Server.CAFile,
		CertFile:   c.Server.CertFile,
		KeyFile:    c.Server.KeyFile,
		ServerName: c.Server.ServerName,
		RPCTimeout: c.RPCTimeout.Duration,
		Clock:      clk,
		Logger:     logger.WithName("signerclient"),
	}
}

package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/server/httpserver"
	"github.com/signet-pki/signet/watcher/csrsigner"
	"github.com/signet-pki/signet/watcher/leader"
	"github.com/signet-pki/signet/watcher/metrics"
	"github.com/signet-pki/signet/watcher/signerclient"
)

// Component is the source component of the watcher's Events.
const Component = "signet-watcher"

// Run defaults and validates a copy of cfg, connects to the signing server, and runs the CSR
// signing controller until ctx is done. It returns nil after a clean stop and an error if the
// configuration is invalid, the client cannot be built, the metrics listener cannot bind, or
// the controller fails.
//
// With metricsAddress set it serves /metrics, /livez (always 200) and /readyz (200 on a
// standby, and on the leader once the controller's caches have synced) for as long as it
// runs. It records Events on CSRs as component signet-watcher.
//
// With leader election enabled only the holder of the Lease runs the controller; a standby
// waits, ready. When the leader loses the Lease it stops the controller and Run returns an
// error wrapping leader.ErrLeaseLost: the process should exit and start over.
func Run(ctx context.Context, cfg *Config, kube kubernetes.Interface, logger klog.Logger) error {
	c := *cfg
	c.Default()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("running watcher: invalid configuration: %w", err)
	}
	var election leader.Config
	if c.LeaderElection.IsEnabled() {
		var err error
		if election, err = c.leaderConfig(leader.ProcessEnv()); err != nil {
			return fmt.Errorf("running watcher: %w", err)
		}
	}
	clk := clock.RealClock{}
	m := metrics.New(c.SignerNames, csrsigner.Outcomes())

	client, err := signerclient.New(c.signerClientConfig(clk, logger, m))
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	defer func() {
		if err := client.Close(); err != nil {
			logger.Error(err, "Closing signer client")
		}
	}()

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	broadcaster.StartStructuredLogging(4)
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component})

	state := &runState{}
	stopHTTP, err := c.serveOperational(ctx, m, state, logger)
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	defer stopHTTP()

	runController := func(ctx context.Context) error {
		return c.runController(ctx, kube, client, recorder, m, state, clk, logger)
	}
	logger.Info("Starting watcher", "servers", c.serverAddresses(), "signerNames", c.SignerNames,
		"leaderElection", c.LeaderElection.IsEnabled(), "metricsAddress", c.MetricsAddress)
	if !c.LeaderElection.IsEnabled() {
		// Without election this replica leads for the whole run.
		m.SetLeader(true)
		defer m.SetLeader(false)
		err = runController(ctx)
	} else {
		election.Recorder = recorder
		election.Leases = kube.CoordinationV1()
		election.OnLeading = m.SetLeader
		err = leader.Run(klog.NewContext(ctx, logger.WithName("leader")), election, runController)
	}
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	return nil
}

// runController runs one CSR signing controller until ctx ends (a leader term, or the whole
// run without leader election), publishing it to the readiness probe and the queue gauges.
func (c *Config) runController(ctx context.Context, kube kubernetes.Interface, client *signerclient.Client,
	recorder record.EventRecorder, m *metrics.Metrics, state *runState, clk clock.PassiveClock, logger klog.Logger,
) error {
	controller, err := csrsigner.New(kube, client, csrsigner.Options{
		SignerNames:       c.SignerNames,
		BackoffInitial:    c.Backoff.Initial.Duration,
		BackoffMax:        c.Backoff.Max.Duration,
		Clock:             clk,
		Recorder:          recorder,
		SignedEventAlways: c.SignedEvents == SignedEventsAll,
		Metrics:           m,
	})
	if err != nil {
		return err
	}
	state.setController(controller)
	defer state.setController(nil)
	m.SetQueue(controller)
	defer m.SetQueue(nil)
	return controller.Run(klog.NewContext(ctx, logger.WithName("csrsigner")), c.Workers)
}

// serveOperational binds the metrics listener, if enabled, and serves /metrics, /livez and
// /readyz on it until the returned stop is called. Binding before anything runs makes a
// taken port fail the start.
func (c *Config) serveOperational(ctx context.Context, m *metrics.Metrics, state *runState, logger klog.Logger) (stop func(), err error) {
	if !c.MetricsEnabled() {
		return func() {}, nil
	}
	lis, err := net.Listen("tcp", c.MetricsAddress)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (metricsAddress): %w", c.MetricsAddress, err)
	}
	log := slog.New(logr.ToSlogHandler(logger.WithName("http")))
	srv := httpserver.New(c.MetricsAddress, m.Handler(), state.ready, log)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ctx, lis); err != nil {
			logger.Error(err, "Serving metrics")
		}
	})
	return func() { cancel(); wg.Wait() }, nil
}

// leaderConfig resolves the Lease's namespace and this replica's identity from env.
func (c *Config) leaderConfig(env leader.Env) (leader.Config, error) {
	le := c.LeaderElection
	ns, err := env.Namespace(le.Namespace)
	if err != nil {
		return leader.Config{}, err
	}
	id, err := env.Identity(le.Identity)
	if err != nil {
		return leader.Config{}, err
	}
	return leader.Config{
		Namespace:     ns,
		Name:          le.LeaseName,
		Identity:      id,
		LeaseDuration: le.LeaseDuration.Duration,
		RenewDeadline: le.RenewDeadline.Duration,
		RetryPeriod:   le.RetryPeriod.Duration,
	}, nil
}

// signerClientConfig is the signer client's part of the configuration.
func (c *Config) signerClientConfig(clk clock.PassiveClock, logger klog.Logger, m *metrics.Metrics) signerclient.Config {
	return signerclient.Config{
		Address:    c.Server.Address,
		Addresses:  c.Server.Addresses,
		CAFile:     c.Server.CAFile,
		CertFile:   c.Server.CertFile,
		KeyFile:    c.Server.KeyFile,
		ServerName: c.Server.ServerName,
		RPCTimeout: c.RPCTimeout.Duration,
		Clock:      clk,
		Logger:     logger.WithName("signerclient"),
		ObserveRPC: m.ObserveRPC,
	}
}

// serverAddresses lists the signing server endpoints, for the start-up log line.
func (c *Config) serverAddresses() []string {
	if c.Server.Address == "" {
		return c.Server.Addresses
	}
	return append([]string{c.Server.Address}, c.Server.Addresses...)
}

// runState is what /readyz reads: the controller of the current leader term, if any.
type runState struct {
	controller atomic.Pointer[csrsigner.Controller]
}

func (s *runState) setController(c *csrsigner.Controller) { s.controller.Store(c) }

// errNotSynced is /readyz's answer while the leader's caches are filling.
var errNotSynced = errors.New("CSR informer caches have not synced")

// ready is /readyz: a standby (no controller) is ready; the leader once its controller's
// caches have synced.
func (s *runState) ready() error {
	c := s.controller.Load()
	if c == nil {
		return nil
	}
	if !c.HasSynced() {
		return errNotSynced
	}
	return nil
}

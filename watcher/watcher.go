package watcher

import (
	"context"
	"errors"
	"fmt"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/internal/httpserver"
	"github.com/signet-pki/signet/internal/version"
	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/csrsigner"
	"github.com/signet-pki/signet/watcher/kubeclient"
	"github.com/signet-pki/signet/watcher/leader"
	"github.com/signet-pki/signet/watcher/metrics"
	"github.com/signet-pki/signet/watcher/pcrsigner"
	"github.com/signet-pki/signet/watcher/trustbundle"
	"github.com/signet-pki/signet/watcher/witness"
)

// Component is the source component of the watcher's Events.
const Component = "signet-watcher"

// Run defaults and validates a copy of cfg, connects to the signing server, and runs the
// signing controllers until ctx is done: the CSR controller always, the PodCertificateRequest
// controller when podCertificateRequests is enabled, the cluster serves PodCertificateRequests
// (certificates.k8s.io/v1, else v1beta1; see pcrsigner.Discover) and the watcher may list,
// watch and update their status. Otherwise it logs once why it signs CSRs only. With
// trustBundles enabled and ClusterTrustBundles served (v1, else v1beta1; see
// trustbundle.Discover) it also publishes every signer's trust anchors as a signer-linked
// ClusterTrustBundle (trustbundle.Publisher) and reports each published bundle to the signing
// server under clusterName; otherwise it logs once why not. It returns nil
// after a clean stop and an error if the configuration is invalid, discovery keeps failing,
// the client cannot be built, the metrics listener cannot bind, the signing server refuses
// this watcher's version (ErrUnsupportedVersion; its first call, checkServerVersion), or a
// controller fails.
//
// With metricsAddress set it serves /metrics, /livez (always 200) and /readyz (200 on a
// standby, and on the leader once every controller's caches have synced) for as long as it
// runs. It records Events on CSRs and PodCertificateRequests as component signet-watcher.
//
// With leader election enabled only the holder of the Lease runs the controllers; a standby
// waits, ready. When the leader loses the Lease it stops the controllers and Run returns an
// error wrapping leader.ErrLeaseLost: the process should exit and start over.
func Run(ctx context.Context, cfg *Config, kube kubeclient.Interface, logger klog.Logger) error {
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
	witnessOpts, err := c.witnessOptions(leader.ProcessEnv())
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	clk := clock.RealClock{}
	m := metrics.New(c.SignerNames, csrsigner.Outcomes(), pcrsigner.Outcomes(), trustbundle.Reasons())
	m.Witness().InitResults(witness.Results())

	client, err := signerclient.New(c.signerClientConfig(clk, logger, m))
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	defer func() {
		if err := client.Close(); err != nil {
			logger.Error(err, "Closing signer client")
		}
	}()
	m.WatchClientCertificate(client.ClientCertificate)

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
	if err := checkServerVersion(ctx, client, version.Version, logger); err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}

	// After the listener is up: /livez answers while discovery retries.
	pcrVersion, err := c.podCertificateVersion(ctx, kube, logger)
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	ctbVersion, err := c.trustBundleVersion(ctx, kube, logger)
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	deps := controllerDeps{kube: kube, client: client, recorder: recorder, metrics: m, state: state,
		clock: clk, logger: logger, pcrVersion: pcrVersion, ctbVersion: ctbVersion, witness: witnessOpts}
	runControllers := func(ctx context.Context) error { return c.runControllers(ctx, deps) }
	logger.Info("Starting watcher", "servers", c.serverAddresses(), "signerNames", c.SignerNames,
		"podCertificateRequests", pcrVersion != pcrsigner.NotServed, "podCertificateRequestAPI", pcrVersion,
		"trustBundles", ctbVersion != trustbundle.NotServed, "clusterTrustBundleAPI", ctbVersion,
		"leaderElection", c.LeaderElection.IsEnabled(), "metricsAddress", c.MetricsAddress)
	if !c.LeaderElection.IsEnabled() {
		// Without election this replica leads for the whole run.
		m.SetLeader(true)
		defer m.SetLeader(false)
		err = runControllers(ctx)
	} else {
		election.Recorder = recorder
		election.Leases = kube.CoordinationV1()
		election.OnLeading = m.SetLeader
		err = leader.Run(klog.NewContext(ctx, logger.WithName("leader")), election, runControllers)
	}
	if err != nil {
		return fmt.Errorf("running watcher: %w", err)
	}
	return nil
}

// controllerDeps is what the controllers of a leader term are built from.
type controllerDeps struct {
	kube       kubeclient.Interface
	client     *signerclient.Client
	recorder   record.EventRecorder
	metrics    *metrics.Metrics
	state      *runState
	clock      clock.WithTicker
	logger     klog.Logger
	pcrVersion pcrsigner.APIVersion   // NotServed: no PodCertificateRequest controller
	ctbVersion trustbundle.APIVersion // NotServed: no ClusterTrustBundle publisher
	witness    *witness.Options       // read at start (witnessOptions); nil: no ledger witness
}

// controller is one signing controller of a leader term.
type controller struct {
	name string
	run  func(ctx context.Context, workers int) error
	syncer
}

// runControllers runs the CSR signing controller and, if d.pcrVersion is set, the
// PodCertificateRequest signing controller, and if d.ctbVersion is set, the ClusterTrustBundle
// publisher until ctx ends (a leader term, or the whole run
// without leader election), publishing them to the readiness probe and the queue gauges. If
// one fails, the others are stopped too and the errors are returned.
func (c *Config) runControllers(ctx context.Context, d controllerDeps) error {
	defer d.metrics.CSRs().SetQueue(nil)
	defer d.metrics.PodCertificates().SetQueue(nil)
	controllers, err := c.buildControllers(d)
	if err != nil {
		return err
	}
	synced := make([]syncer, len(controllers))
	for i, ctrl := range controllers {
		synced[i] = ctrl.syncer
	}
	d.state.setControllers(synced)
	defer d.state.setControllers(nil)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(controllers))
	for _, ctrl := range controllers {
		go func() {
			err := ctrl.run(klog.NewContext(ctx, d.logger.WithName(ctrl.name)), c.Workers)
			if err != nil {
				cancel() // one controller failed: stop the term
			}
			errs <- err
		}()
	}
	var all []error
	for range controllers {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// buildControllers builds the controllers of a leader term, in order: the CSR controller
// always, the ClusterTrustBundle publisher when the cluster serves ClusterTrustBundles and
// trustBundles is enabled, the PodCertificateRequest controller when the cluster serves the
// API. The signing controllers publish their queues to the metrics.
func (c *Config) buildControllers(d controllerDeps) ([]controller, error) {
	wit, err := newWitness(d)
	if err != nil {
		return nil, err
	}
	addresser := newNodeAddresser(d.kube, c.NodeAddresses)
	signer := gatedSigner{Client: d.client, witness: wit, addresser: addresser}
	csrController, err := csrsigner.New(d.kube, signer, csrsigner.Options{
		SignerNames:       c.SignerNames,
		BackoffInitial:    c.Backoff.Initial.Duration,
		BackoffMax:        c.Backoff.Max.Duration,
		Clock:             d.clock,
		Recorder:          d.recorder,
		SignedEventAlways: c.SignedEvents == SignedEventsAll,
		Metrics:           d.metrics.CSRs(),
	})
	if err != nil {
		return nil, err
	}
	d.metrics.CSRs().SetQueue(csrController)
	controllers := []controller{{name: "csrsigner", run: csrController.Run, syncer: csrController}}
	approver, err := c.tpmApprover(d, addresser)
	if err != nil {
		return nil, err
	}
	if approver != nil {
		controllers = append(controllers, *approver)
	}
	if wit != nil {
		run := func(ctx context.Context, _ int) error { return wit.Run(ctx) }
		controllers = append(controllers, controller{name: "witness", run: run, syncer: wit})
	}
	if d.ctbVersion != trustbundle.NotServed {
		publisher, err := trustbundle.New(d.kube, d.client, trustbundle.Options{
			Version:     d.ctbVersion,
			SignerNames: c.SignerNames,
			Period:      c.TrustBundles.Period.Duration,
			Clock:       d.clock,
			Recorder:    d.recorder,
			Metrics:     d.metrics.TrustBundles(),
			Reporter:    d.client,
			ClusterName: c.ClusterName,
		})
		if err != nil {
			return nil, err
		}
		run := func(ctx context.Context, _ int) error { return publisher.Run(ctx) }
		controllers = append(controllers, controller{name: "trustbundle", run: run, syncer: publisher})
	}
	if d.pcrVersion == pcrsigner.NotServed {
		return controllers, nil
	}
	pcrController, err := pcrsigner.New(d.kube, signer, pcrsigner.Options{
		Version:           d.pcrVersion,
		SignerNames:       c.SignerNames,
		BackoffInitial:    c.Backoff.Initial.Duration,
		BackoffMax:        c.Backoff.Max.Duration,
		GiveUpAfter:       c.PodCertificateRequests.GiveUpAfter.Duration,
		Clock:             d.clock,
		Recorder:          d.recorder,
		SignedEventAlways: c.SignedEvents == SignedEventsAll,
		Metrics:           d.metrics.PodCertificates(),
	})
	if err != nil {
		return nil, err
	}
	d.metrics.PodCertificates().SetQueue(pcrController)
	return append(controllers, controller{name: "pcrsigner", run: pcrController.Run, syncer: pcrController}), nil
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

// signerClientConfig is the signer client's part of the configuration. A watcher of a single
// signer follows that signer's health on each endpoint, so it fails over when the signer's CA
// key is unreachable there; a watcher of several follows the server's overall health (one
// connection cannot skip an endpoint for one signer only).
func (c *Config) signerClientConfig(clk clock.PassiveClock, logger klog.Logger, m *metrics.Metrics) signerclient.Config {
	health := signetv1.HealthService
	if len(c.SignerNames) == 1 {
		health = signetv1.SignerHealthService(c.SignerNames[0])
	}
	return signerclient.Config{
		HealthService: health,
		Address:       c.Server.Address,
		Addresses:     c.Server.Addresses,
		CAFile:        c.Server.CAFile,
		CertFile:      c.Server.CertFile,
		KeyFile:       c.Server.KeyFile,
		ServerName:    c.Server.ServerName,
		RPCTimeout:    c.RPCTimeout.Duration,
		Clock:         clk,
		Logger:        logger.WithName("signerclient"),
		ObserveRPC:    m.ObserveRPC,
	}
}

// serverAddresses lists the signing server endpoints, for the start-up log line.
func (c *Config) serverAddresses() []string {
	if c.Server.Address == "" {
		return c.Server.Addresses
	}
	return append([]string{c.Server.Address}, c.Server.Addresses...)
}

// syncer is a running controller as /readyz sees it.
type syncer interface{ HasSynced() bool }

// runState is what /readyz reads: the controllers of the current leader term, if any.
type runState struct {
	controllers atomic.Pointer[[]syncer]
}

func (s *runState) setControllers(c []syncer) {
	if c == nil {
		s.controllers.Store(nil)
		return
	}
	s.controllers.Store(&c)
}

// errNotSynced is /readyz's answer while the leader's caches are filling.
var errNotSynced = errors.New("informer caches have not synced")

// ready is /readyz: a standby (no controller) is ready; the leader once every controller's
// caches have synced.
func (s *runState) ready() error {
	controllers := s.controllers.Load()
	if controllers == nil {
		return nil
	}
	for _, c := range *controllers {
		if !c.HasSynced() {
			return errNotSynced
		}
	}
	return nil
}

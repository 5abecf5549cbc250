// Command oracle runs upstream Kueue's scheduler, queue manager, cache and core controllers (from the
// sigs.k8s.io/kueue Go module, unchanged) against an API server, configured by a Kueue Configuration
// file, for pykueue's differential test (benchmarks/diff_upstream). It is upstream's minimalkueue
// wiring plus what minimalkueue leaves at its defaults: fair sharing, admission fair sharing,
// waitForPodsReady, resources and feature gates, all read from the file.
//
// With no job integrations running, something must play the part of a job's controller once a
// Workload is evicted: stop "the job" and give the quota back. The standIn reconciler below does that,
// the way upstream's job framework does for a job that has stopped.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	zaplog "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuealpha "sigs.k8s.io/kueue/apis/kueue/v1alpha1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/config"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"
)

var (
	scheme         = runtime.NewScheme()
	schedulerDelay time.Duration
	queuesAddr     string
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kueue.AddToScheme(scheme))
	utilruntime.Must(kueuealpha.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))
}

func main() {
	configFile := flag.String("config", "", "a Kueue Configuration file (config.kueue.x-k8s.io/v1beta2); defaults when empty")
	featureGates := flag.String("feature-gates", "", "key=value pairs of feature gates, as upstream's manager takes them")
	flag.StringVar(&queuesAddr, "queues-addr", "", "serve GET /queues (JSON: each ClusterQueue's active and "+
		"inadmissible Workloads, as upstream's queue manager holds them) on this address, e.g. 127.0.0.1:0")
	flag.DurationVar(&schedulerDelay, "scheduler-delay", 0, "start the scheduler this long after the manager, so that "+
		"the queues hold every Workload already stored before the first cycle (as in a scenario's first cycle)")
	logOptions := zap.Options{
		TimeEncoder: zapcore.RFC3339NanoTimeEncoder,
		Development: true,
		Level:       zaplog.NewAtomicLevelAt(zapcore.ErrorLevel),
	}
	logOptions.BindFlags(flag.CommandLine)
	flag.Parse()
	log := zap.New(zap.UseFlagOptions(&logOptions))
	ctrl.SetLogger(log)
	os.Exit(run(log, *configFile, *featureGates))
}

func run(log interface {
	Error(error, string, ...any)
	Info(string, ...any)
}, configFile, featureGates string) int {
	_, cfg, err := config.Load(scheme, configFile)
	if err != nil {
		log.Error(err, "loading the configuration")
		return 1
	}
	if err := config.LoadAndValidateFeatureGates(featureGates, cfg.FeatureGates).ToAggregate(); err != nil {
		log.Error(err, "feature gates")
		return 1
	}
	// No job integration runs here (Workloads are created directly), so none is registered for
	// the validation of the defaulted framework list to find; "pod" is the one it always knows.
	if cfg.Integrations != nil {
		cfg.Integrations.Frameworks = []string{"pod"}
	}
	if err := config.Validate(&cfg, scheme).ToAggregate(); err != nil {
		log.Error(err, "validating the configuration")
		return 1
	}

	kubeConfig, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "kubeconfig")
		return 1
	}
	// A small test cluster: no client-side throttling to wait on between a case's steps.
	kubeConfig.QPS = 500
	kubeConfig.Burst = 1000

	mgr, err := ctrl.NewManager(kubeConfig, ctrl.Options{
		Scheme:     scheme,
		Controller: crconfig.Controller{SkipNameValidation: new(true)},
		Metrics:    metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		log.Error(err, "manager")
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		done := make(chan os.Signal, 2)
		signal.Notify(done, syscall.SIGINT, syscall.SIGTERM)
		<-done
		cancel()
	}()

	if err := indexer.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		log.Error(err, "indexers")
		return 1
	}

	blockAdmission := cfg.WaitForPodsReady != nil && cfg.WaitForPodsReady.BlockAdmission != nil &&
		*cfg.WaitForPodsReady.BlockAdmission
	requeuingTimestamp := configapi.EvictionTimestamp
	if cfg.WaitForPodsReady != nil && cfg.WaitForPodsReady.RequeuingStrategy != nil &&
		cfg.WaitForPodsReady.RequeuingStrategy.Timestamp != nil {
		requeuingTimestamp = *cfg.WaitForPodsReady.RequeuingStrategy.Timestamp
	}
	cacheOptions := []schdcache.Option{schdcache.WithPodsReadyTracking(blockAdmission)}
	queueOptions := []qcache.Option{qcache.WithPodsReadyRequeuingTimestamp(requeuingTimestamp)}
	if cfg.Resources != nil && len(cfg.Resources.ExcludeResourcePrefixes) > 0 {
		cacheOptions = append(cacheOptions, schdcache.WithExcludedResourcePrefixes(cfg.Resources.ExcludeResourcePrefixes))
		queueOptions = append(queueOptions, qcache.WithExcludedResourcePrefixes(cfg.Resources.ExcludeResourcePrefixes))
	}
	if cfg.Resources != nil && len(cfg.Resources.Transformations) > 0 {
		cacheOptions = append(cacheOptions, schdcache.WithResourceTransformations(cfg.Resources.Transformations))
		queueOptions = append(queueOptions, qcache.WithResourceTransformations(cfg.Resources.Transformations))
	}
	if cfg.FairSharing != nil {
		cacheOptions = append(cacheOptions, schdcache.WithFairSharing(true))
	}
	if cfg.AdmissionFairSharing != nil {
		cacheOptions = append(cacheOptions, schdcache.WithAdmissionFairSharing(cfg.AdmissionFairSharing))
		queueOptions = append(queueOptions, qcache.WithAdmissionFairSharing(cfg.AdmissionFairSharing))
	}
	cCache := schdcache.New(mgr.GetClient(), cacheOptions...)
	requeuer := qcache.NewRequeuer()
	if err := mgr.Add(requeuer); err != nil {
		log.Error(err, "requeuer")
		return 1
	}
	expectations := preemptexpectations.New()
	queueOptions = append(queueOptions, qcache.WithPreemptionExpectations(expectations))
	queues := qcache.NewManager(mgr.GetClient(), cCache, requeuer, queueOptions...)
	go queues.CleanUpOnContext(ctx)
	go cCache.CleanUpOnContext(ctx)

	if failed, err := core.SetupControllers(mgr, queues, cCache, &cfg, core.SetupControllersOpts{PreemptionExpectations: expectations}); err != nil {
		log.Error(err, "core controllers", "controller", failed)
		return 1
	}
	quotaCheck := configapi.QuotaCheckBlockUndeclared
	if features.Enabled(features.QuotaCheckStrategy) && cfg.Resources != nil && cfg.Resources.QuotaCheckStrategy != nil {
		quotaCheck = *cfg.Resources.QuotaCheckStrategy
	}
	sched := scheduler.New(queues, cCache, mgr.GetClient(), mgr.GetEventRecorder(constants.AdmissionName),
		scheduler.WithPodsReadyRequeuingTimestamp(requeuingTimestamp),
		scheduler.WithFairSharing(cfg.FairSharing),
		scheduler.WithAdmissionFairSharing(cfg.AdmissionFairSharing),
		scheduler.WithQuotaCheckStrategy(quotaCheck),
		scheduler.WithPreemptionExpectations(expectations),
	)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-time.After(schedulerDelay):
		case <-ctx.Done():
			return nil
		}
		return sched.Start(ctx)
	})); err != nil {
		log.Error(err, "scheduler")
		return 1
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("oracle-job-stand-in").For(&kueue.Workload{}).
		Complete(&standIn{client: mgr.GetClient(), clock: clock.RealClock{}}); err != nil {
		log.Error(err, "job stand-in")
		return 1
	}
	if queuesAddr != "" {
		if err := serveQueues(ctx, queuesAddr, queues); err != nil {
			log.Error(err, "queues endpoint")
			return 1
		}
	}
	log.Info("oracle starting")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		return 1
	}
	return 0
}

// standIn plays every Workload's job: when a Workload is evicted (preempted, deactivated, ...) the job
// stops at once, so its quota reservation is cleared with a Requeued condition, as the job framework
// does once the job is no longer active.
type standIn struct {
	client client.Client
	clock  clock.Clock
}

func (s *standIn) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var wl kueue.Workload
	if err := s.client.Get(ctx, req.NamespacedName, &wl); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	evicted := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
	if evicted == nil || evicted.Status != metav1.ConditionTrue || !workload.HasQuotaReservation(&wl) {
		return reconcile.Result{}, nil
	}
	err := workloadpatching.PatchAdmissionStatus(ctx, s.client, &wl, s.clock, func(wl *kueue.Workload) (bool, error) {
		requeue := evicted.Reason == kueue.WorkloadEvictedByPreemption
		changed := workload.SetRequeuedCondition(wl, evicted.Reason, evicted.Message, requeue)
		reason := workload.UnadmittedWorkloadReasonWithFallback(
			kueue.WorkloadQuotaReservedReasonPendingEvaluation,
			kueue.WorkloadPending, //nolint:staticcheck // the reason upstream falls back to
		)
		if workload.UnsetQuotaReservationWithCondition(wl, reason, evicted.Message, s.clock.Now()) {
			changed = true
		}
		return changed, nil
	})
	return reconcile.Result{}, err
}

// serveQueues answers GET /queues with the queue manager's view: which Workloads wait in each
// ClusterQueue's active queue and which are parked as inadmissible (the API does not show the two
// apart). The address it listens on is printed on stdout as "queues: ADDR" for the driver.
func serveQueues(ctx context.Context, addr string, queues *qcache.Manager) error {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/queues", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"active":       queues.Dump(),
			"inadmissible": queues.DumpInadmissible(),
		})
	})
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(listener) }()
	go func() {
		<-ctx.Done()
		_ = server.Close()
	}()
	fmt.Printf("queues: %s\n", listener.Addr())
	return nil
}

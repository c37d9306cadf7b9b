package chaosbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// KubeRenderOptions are the settings of `chaosbench kube render`.
type KubeRenderOptions struct {
	// Workers is the number of worker pods the load is split over.
	Workers int
	// Config is the scenario file (YAML, flag names as keys) every worker runs its share of.
	Config string
	// Endpoints, CACert, Cert and Key name the etcd cluster under test (they override the scenario's);
	// TLSSecret is the Secret holding ca.crt, tls.crt and tls.key for mutual TLS.
	Endpoints []string
	TLSSecret string
	// Image is the chaosbench image (default: the builtin image `chaosbench image build` makes).
	Image string
	// Name prefixes every object (default chaosbench); Namespace places them (default: kubectl's).
	Name, Namespace string
	// CPU and Memory are each worker's requests and limits.
	CPU, Memory string
	// Storage and StorageClass size the results claim; ResultsClaim names an existing claim instead.
	Storage, StorageClass, ResultsClaim string
	// MergeWait is how long the merge Job waits for every worker's results before it merges those that
	// came and judges each missing share a harness error (default: the scenario's warmup and duration
	// and kubeMergeGrace for the pods to be scheduled, pull the image and write their results). A worker
	// killed without writing anything is then named missing, and the merge fails, instead of waiting.
	MergeWait time.Duration
}

// kubeMergeGrace is what the merge Job waits beyond the scenario's own time by default.
const kubeMergeGrace = 10 * time.Minute

// Ports and paths inside the rendered pods.
const (
	kubeClockPort   = 7400
	kubeScenarioDir = "/etc/chaosbench"
	kubeTLSDir      = "/etc/chaosbench-tls"
	kubeResultsDir  = "/results"
	kubeRunAsUser   = 65532
)

// KubeRender prints the Kubernetes manifests that run a scenario split over opts.Workers generators: the
// scenario as a ConfigMap, a headless Service by which the workers reach worker 0's reference clock, a
// claim for the results, an Indexed Job of the workers (one pod per share, spread over nodes, never
// retried: a violation is not something to retry; one that fails does not stop the others) and a Job that waits for every worker's results and
// merges them into one run (its exit code is the merged outcome). The scenario is checked as a run would
// check it; bad input is a usage error and prints nothing.
func KubeRender(opts KubeRenderOptions, out io.Writer) error {
	s, args, err := opts.workerScenario()
	if err != nil {
		return err
	}
	scenario, err := os.ReadFile(opts.Config)
	if err != nil {
		return outcome.Usagef("--config: %v", err)
	}
	for _, q := range []struct{ flag, v string }{{"--cpu", opts.CPU}, {"--memory", opts.Memory}, {"--storage", opts.Storage}} {
		if _, err := resource.ParseQuantity(q.v); err != nil {
			return outcome.Usagef("%s %q: a Kubernetes quantity, e.g. 1, 500m, 2Gi", q.flag, q.v)
		}
	}
	if opts.Image == "" {
		img, err := clusters.ResolveImage(context.Background(), etcdbuild.Builtin, clusters.ImageOptions{})
		if err != nil {
			return err
		}
		opts.Image = img.Ref
	}
	name := opts.Name
	labels := map[string]string{"app.kubernetes.io/name": "chaosbench", "chaosbench/run": name}
	meta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: opts.Namespace, Labels: labels}
	}
	claim := opts.ResultsClaim
	var docs []any
	docs = append(docs, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(name + "-scenario"),
		Data:       map[string]string{"scenario.yaml": string(scenario)},
	}, &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(name),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"chaosbench/run": name, "chaosbench/role": "worker"},
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{{Name: "clock", Port: kubeClockPort, TargetPort: intstr.FromInt32(kubeClockPort)}},
		},
	})
	if claim == "" {
		claim = name + "-results"
		pvc := &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: meta(claim),
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(opts.Storage)}},
			},
		}
		if opts.StorageClass != "" {
			pvc.Spec.StorageClassName = &opts.StorageClass
		}
		docs = append(docs, pvc)
	}
	workers := opts.job(name+"-workers", labels, "worker", args, claim)
	n := int32(opts.Workers)
	workers.Spec.CompletionMode = kptr(batchv1.IndexedCompletion)
	// Each share runs once (a violation is not something to retry), and a share that fails does not stop
	// the others: with a Job-wide backoffLimit the controller would terminate every running worker at the
	// first failure, and the merge would see interrupted shares instead of the one that is missing.
	workers.Spec.BackoffLimit, workers.Spec.BackoffLimitPerIndex = nil, kptr(int32(0))
	workers.Spec.Completions, workers.Spec.Parallelism = &n, &n
	pod := &workers.Spec.Template.Spec
	pod.Subdomain = name
	pod.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"chaosbench/run": name, "chaosbench/role": "worker"}},
	}}
	c := &pod.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: "clock", ContainerPort: kubeClockPort}}
	c.Env = []corev1.EnvVar{{Name: JobIndexEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}}
	dirs := make([]string, opts.Workers)
	for i := range dirs {
		dirs[i] = fmt.Sprintf("%s/worker-%d", kubeResultsDir, i)
	}
	wait := opts.MergeWait
	if wait == 0 {
		wait = s.Warmup + s.Duration + kubeMergeGrace
	}
	mergeArgs := append(append([]string{"merge"}, dirs...), "--out", kubeResultsDir+"/merged", "--wait", wait.String())
	docs = append(docs, workers, opts.job(name+"-merge", labels, "merge", mergeArgs, claim))

	fmt.Fprintf(out, "# chaosbench kube render: %s split over %d workers, seed %d\n", s.DisplayName(), opts.Workers, s.Seed)
	fmt.Fprintf(out, "# kubectl apply -f THIS && kubectl wait --for=condition=complete --timeout=24h job/%s-merge\n", name)
	for _, d := range docs {
		b, err := manifest(d)
		if err != nil {
			return fmt.Errorf("kube render: %w", err)
		}
		fmt.Fprintf(out, "---\n%s", b)
	}
	return nil
}

// manifest is an object as YAML for kubectl apply: without the status and the empty creation timestamps
// the API types carry.
func manifest(obj any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	strip := func(meta any) {
		if mm, ok := meta.(map[string]any); ok && mm["creationTimestamp"] == nil {
			delete(mm, "creationTimestamp")
		}
	}
	strip(m["metadata"])
	if spec, ok := m["spec"].(map[string]any); ok {
		if tpl, ok := spec["template"].(map[string]any); ok {
			strip(tpl["metadata"])
		}
	}
	return yaml.Marshal(m)
}

// workerScenario checks the scenario file as the workers will run it, and returns it with the worker
// command line every pod of the Indexed Job runs (its index comes from JOB_COMPLETION_INDEX).
func (o *KubeRenderOptions) workerScenario() (Scenario, []string, error) {
	switch {
	case o.Config == "":
		return Scenario{}, nil, outcome.Usagef("kube render: give --config, the scenario every worker runs its share of")
	case o.Workers < 1 || o.Workers > 64:
		return Scenario{}, nil, outcome.Usagef("--workers %d: between 1 and 64", o.Workers)
	case o.MergeWait < 0:
		return Scenario{}, nil, outcome.Usagef("--merge-wait %s: a positive duration", o.MergeWait)
	}
	if o.Name == "" {
		o.Name = "chaosbench"
	}
	// The longest name is the workers' Job's, whose pods' hostnames (name-workers-I) the headless Service
	// resolves: it must be a DNS label.
	if errs := validation.IsDNS1035Label(o.Name + "-workers-63"); len(errs) > 0 {
		return Scenario{}, nil, outcome.Usagef("--name %q: %s", o.Name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(o.Namespace); o.Namespace != "" && len(errs) > 0 {
		return Scenario{}, nil, outcome.Usagef("--namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	s := DefaultScenario()
	fs := pflag.NewFlagSet("scenario", pflag.ContinueOnError)
	BindFlags(fs, &s)
	if err := LoadScenarioFile(o.Config, fs); err != nil {
		return Scenario{}, nil, err
	}
	if len(o.Endpoints) > 0 {
		s.Endpoints = o.Endpoints
	}
	if len(s.Endpoints) == 0 {
		return Scenario{}, nil, outcome.Usagef("kube render: give --endpoints, the etcd cluster under test (or endpoints in the scenario)")
	}
	if o.TLSSecret == "" {
		// The scenario's certificate files are paths on this machine, not in the pods.
		switch {
		case s.CACert != "" || s.Cert != "" || s.Key != "":
			return Scenario{}, nil, outcome.Usagef("kube render: the scenario's TLS files are not in the worker pods: give --tls-secret, a Secret with ca.crt, tls.crt and tls.key")
		case strings.HasPrefix(s.Endpoints[0], "https://"):
			return Scenario{}, nil, outcome.Usagef("kube render: %s is https: give --tls-secret, a Secret with ca.crt, tls.crt and tls.key", s.Endpoints[0])
		}
	}
	if s.Seed == 0 {
		s.Seed = newSeed()
	}
	ref := fmt.Sprintf("http://%s-workers-0.%s:%d", o.Name, o.Name, kubeClockPort)
	args := []string{"run", "--config", kubeScenarioDir + "/scenario.yaml", "--cluster", "external",
		"--endpoints", strings.Join(s.Endpoints, ","), "--workers", strconv.Itoa(o.Workers), "--seed", strconv.FormatInt(s.Seed, 10),
		"--clock-ref", ref, "--out", kubeResultsDir + "/worker-$(" + JobIndexEnv + ")", "--progress", "lines"}
	if o.TLSSecret != "" {
		args = append(args, "--cacert", kubeTLSDir+"/ca.crt", "--cert", kubeTLSDir+"/tls.crt", "--key", kubeTLSDir+"/tls.key")
	}
	// Checked as worker 0 will check it (without contacting the cluster).
	w := s
	w.Cluster, w.Workers, w.Worker, w.ClockRef, w.Out = "external", o.Workers, 0, ref, ""
	w.CACert, w.Cert, w.Key = "", "", ""
	if err := w.validate(); err != nil {
		return Scenario{}, nil, err
	}
	if _, _, err := w.newWorkload(); err != nil {
		return Scenario{}, nil, err
	}
	return s, args, nil
}

// job is a Job of one chaosbench container with the scenario, the results and the TLS files mounted.
func (o *KubeRenderOptions) job(name string, labels map[string]string, role string, args []string, claim string) *batchv1.Job {
	podLabels := map[string]string{"chaosbench/role": role}
	for k, v := range labels {
		podLabels[k] = v
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(o.CPU), corev1.ResourceMemory: resource.MustParse(o.Memory)}
	mounts := []corev1.VolumeMount{{Name: "scenario", MountPath: kubeScenarioDir, ReadOnly: true}, {Name: "results", MountPath: kubeResultsDir}}
	volumes := []corev1.Volume{
		{Name: "scenario", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: o.Name + "-scenario"}}}},
		{Name: "results", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
	}
	if o.TLSSecret != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "tls", MountPath: kubeTLSDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: o.TLSSecret}}})
	}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: kptr(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: kptr(true), RunAsUser: kptr(int64(kubeRunAsUser)), RunAsGroup: kptr(int64(kubeRunAsUser)), FSGroup: kptr(int64(kubeRunAsUser)),
					},
					Containers: []corev1.Container{{
						Name: role, Image: o.Image, Command: []string{"/chaosbench"}, Args: args,
						Resources:    corev1.ResourceRequirements{Requests: res, Limits: res},
						VolumeMounts: mounts,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: kptr(false), ReadOnlyRootFilesystem: kptr(false),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

func kptr[T any](v T) *T { return &v }

package ci

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/etcd-chaosbench/chaosbench"
)

const cronJobFile = "kubernetes/nightly-chaos.yaml"

// manifests are the decoded objects of the Kubernetes file.
type manifests struct {
	namespaces map[string]bool
	secrets    map[string]corev1.Secret
	configMaps map[string]corev1.ConfigMap
	claims     map[string]corev1.PersistentVolumeClaim
	cronJobs   []batchv1.CronJob
}

// decodeManifests decodes every document strictly (an unknown or misplaced field is an error) into its
// Kubernetes API type, and checks what the API server would refuse or what would fail at night: the
// schedule, the container and its arguments, and that every volume, mount, Secret, ConfigMap and claim the
// CronJob names exists in the file.
func decodeManifests(content string) (*manifests, error) {
	m := &manifests{namespaces: map[string]bool{}, secrets: map[string]corev1.Secret{}, configMaps: map[string]corev1.ConfigMap{}, claims: map[string]corev1.PersistentVolumeClaim{}}
	for i, doc := range strings.Split(content, "\n---\n") {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		var err error
		var ns string
		switch head.APIVersion + " " + head.Kind {
		case "v1 Namespace":
			var o corev1.Namespace
			err = yaml.UnmarshalStrict([]byte(doc), &o)
			m.namespaces[o.Name] = true
			ns = o.Name
		case "v1 Secret":
			var o corev1.Secret
			err = yaml.UnmarshalStrict([]byte(doc), &o)
			m.secrets[o.Name] = o
			ns = o.Namespace
		case "v1 ConfigMap":
			var o corev1.ConfigMap
			err = yaml.UnmarshalStrict([]byte(doc), &o)
			m.configMaps[o.Name] = o
			ns = o.Namespace
		case "v1 PersistentVolumeClaim":
			var o corev1.PersistentVolumeClaim
			err = yaml.UnmarshalStrict([]byte(doc), &o)
			m.claims[o.Name] = o
			ns = o.Namespace
		case "batch/v1 CronJob":
			var o batchv1.CronJob
			err = yaml.UnmarshalStrict([]byte(doc), &o)
			m.cronJobs = append(m.cronJobs, o)
			ns = o.Namespace
		default:
			err = fmt.Errorf("unexpected %s %s", head.APIVersion, head.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, head.Kind, err)
		}
		// `kubectl apply -f` of the file must create everything in one namespace the file creates first.
		if head.Kind != "Namespace" && !m.namespaces[ns] {
			return nil, fmt.Errorf("document %d (%s): namespace %q is not created earlier in the file", i+1, head.Kind, ns)
		}
	}
	if len(m.cronJobs) != 1 {
		return nil, fmt.Errorf("%d CronJobs, want 1", len(m.cronJobs))
	}
	cj := m.cronJobs[0]
	if _, err := cron.ParseStandard(cj.Spec.Schedule); err != nil {
		return nil, fmt.Errorf("schedule %q: %w", cj.Spec.Schedule, err)
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		return nil, fmt.Errorf("concurrencyPolicy %q: two nights must not run at once", cj.Spec.ConcurrencyPolicy)
	}
	// A red night is never run again: the suite retries a harness error itself (--retry-harness), and a pod
	// restarted or a Job retried after a violation or a crashed member would run it again.
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		return nil, fmt.Errorf("restartPolicy %q: want Never (a Job's pods need Never or OnFailure, and OnFailure would run a red night again)", pod.RestartPolicy)
	}
	if bl := cj.Spec.JobTemplate.Spec.BackoffLimit; bl == nil || *bl != 0 {
		return nil, fmt.Errorf("backoffLimit %v: want 0 (the default, 6, would run a red night again)", bl)
	}
	if len(pod.Containers) != 1 || pod.Containers[0].Image == "" || pod.Containers[0].Name == "" {
		return nil, fmt.Errorf("want one named container with an image")
	}
	c := pod.Containers[0]
	if len(c.Args) < 2 || c.Args[0] != "suite" {
		return nil, fmt.Errorf("args %v: want chaosbench suite", c.Args)
	}
	if !slices.Contains(c.Args, "--retry-harness") {
		return nil, fmt.Errorf("args %v: want --retry-harness (a harness error is ours: retried once, nothing else is)", c.Args)
	}
	// The kubelet expands $(VAR) in args from the container's env, and leaves an undefined one as it is:
	// the suite would then select by the tag "$(TAGS)" and run nothing.
	for _, a := range c.Args {
		for _, ref := range envRef.FindAllStringSubmatch(a, -1) {
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == ref[1] }) {
				return nil, fmt.Errorf("args: %s: %s is not in the container's env", a, ref[0])
			}
		}
	}
	for _, a := range c.Args {
		if strings.Contains(a, "known-issues=fail") {
			return nil, fmt.Errorf("args: %s: a known issue passes the night, named", a)
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		switch {
		case v.ConfigMap != nil:
			if _, ok := m.configMaps[v.ConfigMap.Name]; !ok {
				return nil, fmt.Errorf("volume %s: no ConfigMap %s", v.Name, v.ConfigMap.Name)
			}
		case v.Secret != nil:
			if _, ok := m.secrets[v.Secret.SecretName]; !ok {
				return nil, fmt.Errorf("volume %s: no Secret %s", v.Name, v.Secret.SecretName)
			}
		case v.PersistentVolumeClaim != nil:
			if _, ok := m.claims[v.PersistentVolumeClaim.ClaimName]; !ok {
				return nil, fmt.Errorf("volume %s: no PersistentVolumeClaim %s", v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		default:
			return nil, fmt.Errorf("volume %s: not a ConfigMap, Secret or claim", v.Name)
		}
	}
	for _, vm := range c.VolumeMounts {
		if _, ok := volumes[vm.Name]; !ok {
			return nil, fmt.Errorf("volumeMount %s: no such volume", vm.Name)
		}
	}
	return m, nil
}

// envRef matches a reference to the container's environment in its args, as the kubelet expands them.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandEnv expands the container's env in an argument as the kubelet does (values only, no references
// to secrets or fields: the CronJob has none).
func expandEnv(c corev1.Container, arg string) string {
	return envRef.ReplaceAllStringFunc(arg, func(ref string) string {
		for _, e := range c.Env {
			if "$("+e.Name+")" == ref {
				return e.Value
			}
		}
		return ref
	})
}

// suiteArgs are the CronJob's suite arguments: the scenario paths and the --set settings.
func suiteArgs(c corev1.Container) (paths, set []string) {
	for _, a := range c.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--set="); ok {
			set = append(set, v)
		} else if !strings.HasPrefix(a, "-") {
			paths = append(paths, a)
		}
	}
	return paths, set
}

// TestKubernetesCronJob: the CronJob, its Secret, ConfigMap and claim decode strictly into the Kubernetes
// API types and refer to each other; the TLS files the suite is told to use are the Secret's keys where it
// is mounted; and the ConfigMap's scenarios, with the CronJob's settings over them, are a valid suite
// (the same check `chaosbench suite` makes before it starts anything).
func TestKubernetesCronJob(t *testing.T) {
	content, err := os.ReadFile(cronJobFile)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifests(string(content))
	if err != nil {
		t.Fatal(err)
	}
	cj := m.cronJobs[0]
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	c := pod.Containers[0]
	paths, set := suiteArgs(c)
	mounts := map[string]string{} // mount path -> volume
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm.Name
	}
	for _, kv := range set {
		k, v, _ := strings.Cut(kv, "=")
		if k != "cacert" && k != "cert" && k != "key" {
			continue
		}
		vol := mounts[filepath.Dir(v)]
		i := slices.IndexFunc(pod.Volumes, func(x corev1.Volume) bool { return x.Name == vol })
		if i < 0 || pod.Volumes[i].Secret == nil {
			t.Fatalf("--set %s: %s is not a mounted Secret", kv, filepath.Dir(v))
		}
		if _, ok := m.secrets[pod.Volumes[i].Secret.SecretName].StringData[filepath.Base(v)]; !ok {
			t.Errorf("--set %s: the Secret has no key %s", kv, filepath.Base(v))
		}
	}
	if len(paths) != 1 || mounts[paths[0]] == "" {
		t.Fatalf("scenario paths %v: want the mounted ConfigMap", paths)
	}
	dir := t.TempDir()
	cm := m.configMaps[pod.Volumes[slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == mounts[paths[0]] })].ConfigMap.Name]
	for name, body := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := chaosbench.LoadSuite([]string{dir}, set)
	if err != nil {
		t.Fatalf("the ConfigMap's scenarios with the CronJob's settings: %v", err)
	}
	// Every night runs the nightly-tagged scenarios (TAGS as the CronJob sets it); the quick check, TAGS set
	// to smoke by hand (the file's header), runs the smoke-tagged one, and it is quick. Every scenario is in
	// one of the two.
	tags := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(expandEnv(c, a), "--tags="); ok {
			tags = v
		}
	}
	if tags != "nightly" {
		t.Fatalf("the CronJob's --tags is %q, want nightly", tags)
	}
	nightly, err := chaosbench.SelectSuite(entries, chaosbench.SuiteOptions{Tags: []string{"nightly"}})
	if err != nil || len(nightly) < 2 {
		t.Fatalf("--tags=nightly selects %d scenarios: %v", len(nightly), err)
	}
	smoke, err := chaosbench.SelectSuite(entries, chaosbench.SuiteOptions{Tags: []string{"smoke"}})
	if err != nil || len(smoke) != 1 || smoke[0].Scenario.Duration > 30*time.Second {
		t.Fatalf("--tags=smoke selects %d scenarios (want one quick check): %v", len(smoke), err)
	}
	if len(nightly)+len(smoke) != len(cm.Data) {
		t.Errorf("%d nightly and %d smoke scenarios of %d: each one in one of the two", len(nightly), len(smoke), len(cm.Data))
	}
	for _, e := range append(nightly, smoke...) {
		if e.Scenario.Cluster != "external" || len(e.Scenario.Endpoints) != 3 {
			t.Errorf("%s: cluster %s, endpoints %v", e.Name, e.Scenario.Cluster, e.Scenario.Endpoints)
		}
	}
}

// TestKubernetesCronJobBroken: the validation fails on broken copies of the file.
func TestKubernetesCronJobBroken(t *testing.T) {
	content, err := os.ReadFile(cronJobFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"misspelled field", "  concurrencyPolicy: Forbid", "  concurencyPolicy: Forbid", "unknown field"},
		{"field in the wrong place", "          restartPolicy: Never", "          restartPolicy: Never\n          schedule: x", "unknown field"},
		{"wrong type", "      backoffLimit: 0", "      backoffLimit: none", "backoffLimit"},
		{"bad schedule", `schedule: "17 2 * * *"`, `schedule: "17 2 * *"`, "schedule"},
		{"missing secret", "secretName: chaosbench-etcd-client", "secretName: etcd-client", "no Secret"},
		{"restart policy", "restartPolicy: Never", "restartPolicy: Always", "restartPolicy"},
		{"restarted on failure", "restartPolicy: Never", "restartPolicy: OnFailure", "run a red night again"},
		{"retried by the Job", "      backoffLimit: 0", "      backoffLimit: 2", "run a red night again"},
		{"no backoff limit", "      backoffLimit: 0\n", "", "backoffLimit <nil>"},
		{"no retry of harness errors", "                - --retry-harness\n", "", "--retry-harness"},
		{"known issues fail", "                - --retry-harness\n", "                - --retry-harness\n                - --set=known-issues=fail\n", "known issue passes"},
		{"tag variable not in env", "                - name: TAGS\n", "                - name: TAG\n", "$(TAGS) is not in the container's env"},
		{"no namespace", "kind: Namespace\nmetadata:\n  name: chaosbench\n", "kind: Namespace\nmetadata:\n  name: chaos\n", `namespace "chaosbench" is not created`},
		{"unmounted volume", "- name: results\n                  mountPath", "- name: result\n                  mountPath", "no such volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(content), tc.old) {
				t.Fatalf("the file no longer holds %q: update the test", tc.old)
			}
			_, err := decodeManifests(strings.Replace(string(content), tc.old, tc.new, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Package controlplane runs a real Kubernetes control plane against the etcd cluster under test: N
// kube-apiservers, one kube-controller-manager, one kube-scheduler and the KWOK controller, which plays the
// kubelets of simulated nodes. The binaries come from package kubebuild.
//
// Every process is a child in its own process group that the kernel kills when chaosbench dies (see
// clusters.Spawner); Close stops them all, gracefully and then by force. Certificates are generated per run:
// the apiservers serve with a certificate of a fresh CA, and every client (the components, KWOK, the
// workload) authenticates with a client certificate of that CA. Authorization is AlwaysAllow: the run
// measures storage traffic, not RBAC.
package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
)

// Etcd says how the apiservers reach the cluster under test.
type Etcd struct {
	Endpoints []string
	// TLS holds client certificate files when the cluster serves TLS (zero otherwise).
	TLS clusters.TLSFiles
}

// Options configures Start.
type Options struct {
	Binaries kubebuild.Binaries
	// Dir receives certificates, kubeconfigs and one log per process.
	Dir  string
	Etcd Etcd
	// Apiservers is the number of kube-apiservers (at least 1).
	Apiservers int
	// CompactionInterval is --etcd-compaction-interval; EventTTL is --event-ttl.
	CompactionInterval time.Duration
	EventTTL           time.Duration
	// ReadyTimeout bounds the wait for every apiserver's /readyz (default 2 minutes).
	ReadyTimeout time.Duration
	// APIServerArgs are appended to every kube-apiserver's flags (tests use them to break one).
	APIServerArgs []string
	// Log receives a line per started component; nil discards them.
	Log io.Writer
}

// Process is one running component.
type Process struct {
	// Name is the component: kube-apiserver-0, kube-controller-manager, kube-scheduler, kwok.
	Name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error // the exit status, once done is closed
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	opts    Options
	spawner *clusters.Spawner
	procs   []*Process
	// URLs are the apiservers' https addresses, one per apiserver.
	urls []string
	// Client holds the files clients authenticate and verify the apiservers with.
	client clusters.TLSFiles

	closeOnce sync.Once
}

// APIServerURLs returns the apiservers' base URLs.
func (c *ControlPlane) APIServerURLs() []string { return c.urls }

// ClientTLS returns the CA that signed the apiservers' certificates, and a client certificate they accept.
func (c *ControlPlane) ClientTLS() clusters.TLSFiles { return c.client }

// Processes returns every component, apiservers first.
func (c *ControlPlane) Processes() []*Process { return c.procs }

// Start starts the control plane and returns once every apiserver is ready and the other components run.
// An apiserver that does not become ready is an error of one line that says which and why (its last log
// line); everything started is stopped again.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.Apiservers < 1 {
		return nil, fmt.Errorf("start control plane: need at least one apiserver")
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.CompactionInterval <= 0 {
		opts.CompactionInterval = 5 * time.Minute
	}
	if opts.EventTTL <= 0 {
		opts.EventTTL = time.Hour
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	c := &ControlPlane{opts: opts, spawner: clusters.NewSpawner()}
	defer func() {
		if err != nil {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	server, client, err := clusters.GenerateTLS(filepath.Join(opts.Dir, "tls"))
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	c.client = client
	saKey, saPub, err := serviceAccountKeys(filepath.Join(opts.Dir, "tls"))
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	ports, err := freePorts(opts.Apiservers + 2)
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	if err := c.startAPIServers(ctx, ports[:opts.Apiservers], server, saKey, saPub); err != nil {
		return nil, err
	}
	if err := c.startComponents(server.CA, saKey, ports[opts.Apiservers], ports[opts.Apiservers+1]); err != nil {
		return nil, err
	}
	return c, nil
}

// startAPIServers starts one kube-apiserver per port, all on the etcd cluster under test, and waits until
// every one is ready: the other components and the load talk to them from the start, and an apiserver that
// never becomes ready is better reported now, with its last log line, than as a failing load.
func (c *ControlPlane) startAPIServers(ctx context.Context, ports []int, server clusters.TLSFiles, saKey, saPub string) error {
	for i, port := range ports {
		c.urls = append(c.urls, "https://127.0.0.1:"+strconv.Itoa(port))
		args := c.apiserverArgs(i, port, server, saKey, saPub)
		if _, err := c.start(fmt.Sprintf("kube-apiserver-%d", i), c.opts.Binaries.APIServer, args); err != nil {
			return err
		}
	}
	for i := range ports {
		if err := c.waitReady(ctx, i); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.opts.Log, "control plane: %d kube-apiserver(s) ready at %s\n", c.opts.Apiservers, strings.Join(c.urls, ", "))
	return nil
}

// apiserverArgs returns the flags of apiserver i, serving on port with the run's certificates and
// service-account keys; Options.APIServerArgs come last.
func (c *ControlPlane) apiserverArgs(i, port int, server clusters.TLSFiles, saKey, saPub string) []string {
	opts := c.opts
	args := []string{
		"--etcd-servers=" + strings.Join(opts.Etcd.Endpoints, ","),
		"--storage-backend=etcd3",
		"--watch-cache=true",
		"--etcd-compaction-interval=" + opts.CompactionInterval.String(),
		"--event-ttl=" + opts.EventTTL.String(),
		"--bind-address=127.0.0.1",
		// A distinct address per apiserver, as in a real cluster: each keeps its own master lease. It is
		// only advertised (the kubernetes service's endpoints), never dialled, and must not be loopback:
		// TEST-NET-1 addresses.
		"--advertise-address=192.0.2." + strconv.Itoa(i+1),
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + server.Cert, "--tls-private-key-file=" + server.Key,
		"--client-ca-file=" + server.CA,
		"--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--cert-dir=" + filepath.Join(opts.Dir, "apiserver-"+strconv.Itoa(i)),
		"--profiling=false",
	}
	if opts.Etcd.TLS.CA != "" {
		args = append(args, "--etcd-cafile="+opts.Etcd.TLS.CA, "--etcd-certfile="+opts.Etcd.TLS.Cert, "--etcd-keyfile="+opts.Etcd.TLS.Key)
	}
	return append(args, opts.APIServerArgs...)
}

// startComponents starts the components that run against the apiservers: kube-controller-manager,
// kube-scheduler and KWOK (its --server-address on kwokServerPort, its --node-port kwokNodePort, free
// loopback ports as every process here shares the host's network). They are not waited for: each finds
// its apiserver on its own once started.
func (c *ControlPlane) startComponents(rootCA, saKey string, kwokServerPort, kwokNodePort int) error {
	// The other components each talk to one apiserver, spread over them as a load balancer would.
	kubeconfig := func(name string, i int) (string, error) {
		return c.writeKubeconfig(name, c.urls[i%len(c.urls)])
	}
	kcm, err := kubeconfig("kube-controller-manager", 0)
	if err != nil {
		return err
	}
	if _, err := c.start("kube-controller-manager", c.opts.Binaries.ControllerManager, []string{
		"--kubeconfig=" + kcm, "--leader-elect=true", "--secure-port=0",
		"--service-account-private-key-file=" + saKey, "--root-ca-file=" + rootCA,
		"--use-service-account-credentials=false", "--controllers=*",
	}); err != nil {
		return err
	}
	sched, err := kubeconfig("kube-scheduler", 1)
	if err != nil {
		return err
	}
	if _, err := c.start("kube-scheduler", c.opts.Binaries.Scheduler, []string{
		"--kubeconfig=" + sched, "--leader-elect=true", "--secure-port=0",
	}); err != nil {
		return err
	}
	kwok, err := kubeconfig("kwok", 2)
	if err != nil {
		return err
	}
	if _, err := c.start("kwok", c.opts.Binaries.KWOK, []string{
		"--kubeconfig=" + kwok, "--config=" + c.opts.Binaries.KWOKStages,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + KWOKNodeAnnotation + "=fake",
		"--node-lease-duration-seconds=40", "--cidr=10.0.0.1/16", "--node-ip=10.1.0.1",
		"--server-address=127.0.0.1:" + strconv.Itoa(kwokServerPort),
		"--node-port=" + strconv.Itoa(kwokNodePort),
	}); err != nil {
		return err
	}
	fmt.Fprintf(c.opts.Log, "control plane: kube-controller-manager, kube-scheduler and kwok started\n")
	return nil
}

// KWOKNodeAnnotation marks the nodes KWOK manages (value "fake").
const KWOKNodeAnnotation = "kwok.x-k8s.io/node"

// start starts one component with its output in <Dir>/<name>.log.
func (c *ControlPlane) start(name, bin string, args []string) (*Process, error) {
	log, err := os.OpenFile(filepath.Join(c.opts.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	fmt.Fprintf(log, "=== chaosbench: starting %s at %s: %q\n", name, time.Now().Format(time.RFC3339Nano), append([]string{bin}, args...))
	if err := c.spawner.Start(cmd); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(log, "=== chaosbench: %s ended at %s: %v\n", name, time.Now().Format(time.RFC3339Nano), p.err)
		log.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return p, nil
}

// HTTPClient returns an HTTP client that verifies the apiservers and authenticates to them.
func (c *ControlPlane) HTTPClient() (*http.Client, error) {
	cfg, err := c.client.ClientConfig()
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// waitReady waits for apiserver i's /readyz, failing early when its process exits.
func (c *ControlPlane) waitReady(ctx context.Context, i int) error {
	hc, err := c.HTTPClient()
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	hc.Timeout = 2 * time.Second
	defer hc.CloseIdleConnections()
	p := c.procs[i]
	deadline := time.Now().Add(c.opts.ReadyTimeout)
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.urls[i]+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("/readyz answered %d: %s", resp.StatusCode, firstFailed(string(body)))
		} else {
			last = err.Error()
		}
		if done, status := p.Exited(); done {
			return fmt.Errorf("%s exited before it became ready (%v): %s", p.Name, status, lastLogLine(filepath.Join(c.opts.Dir, p.Name+".log")))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become ready within %s (%s); its last log line: %s", p.Name, c.opts.ReadyTimeout, last, lastLogLine(filepath.Join(c.opts.Dir, p.Name+".log")))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", p.Name, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// firstFailed picks the first failing check of a verbose /readyz answer ("[-]etcd failed: ...").
func firstFailed(body string) string {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "[-]") {
			return strings.TrimSpace(line)
		}
	}
	return strings.TrimSpace(strings.ReplaceAll(body, "\n", " "))
}

// lastLogLine returns the last line of a component's log that is not chaosbench's own, to say why it
// stopped.
func lastLogLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "=== chaosbench") {
			if len(l) > 300 {
				l = l[:300] + "..."
			}
			return l
		}
	}
	return "empty log"
}

// writeKubeconfig writes a kubeconfig for one component, authenticating with the client certificate.
func (c *ControlPlane) writeKubeconfig(name, server string) (string, error) {
	path := filepath.Join(c.opts.Dir, name+".kubeconfig")
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: chaosbench
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: chaosbench
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: chaosbench
  context:
    cluster: chaosbench
    user: chaosbench
current-context: chaosbench
`, server, c.client.CA, c.client.Cert, c.client.Key)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return "", fmt.Errorf("write %s kubeconfig: %w", name, err)
	}
	return path, nil
}

// Close stops every component: SIGTERM to each process group, SIGKILL after ten seconds or when ctx ends.
// It is safe to call more than once.
func (c *ControlPlane) Close(ctx context.Context) {
	c.closeOnce.Do(func() {
		for i := len(c.procs) - 1; i >= 0; i-- {
			syscall.Kill(-c.procs[i].PID(), syscall.SIGTERM)
		}
		grace := time.NewTimer(10 * time.Second)
		defer grace.Stop()
		for _, p := range c.procs {
			select {
			case <-p.done:
			case <-grace.C:
			case <-ctx.Done():
			}
			if done, _ := p.Exited(); !done {
				syscall.Kill(-p.PID(), syscall.SIGKILL)
				<-p.done
			}
		}
		c.spawner.Close()
	})
}

// serviceAccountKeys writes the RSA key pair service-account tokens are signed and verified with.
func serviceAccountKeys(dir string) (key, pub string, err error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("service account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("service account key: %w", err)
	}
	key, pub = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), 0o600); err != nil {
		return "", "", fmt.Errorf("service account key: %w", err)
	}
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", "", fmt.Errorf("service account key: %w", err)
	}
	return key, pub, nil
}

// freePorts asks the kernel for n free loopback ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// TLSConfig returns the client TLS configuration of the apiservers' clients.
func (c *ControlPlane) TLSConfig() (*tls.Config, error) { return c.client.ClientConfig() }

// errNotRunning is returned by Stats for a process that has ended.
var errNotRunning = errors.New("not running")

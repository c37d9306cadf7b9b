package clusters

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ReaperCommand is the hidden subcommand under which the chaosbench binary (or a test binary, see
// RunMemberIfRequested) watches over one docker cluster.
//
// Member processes of an embedded cluster die with chaosbench (Pdeathsig), but containers cannot: they are
// children of the Docker daemon. So every docker cluster gets a watchdog process of its own, started before
// any container, in a session of its own so that neither a terminal's Ctrl-C nor the death of chaosbench
// reaches it. It waits for chaosbench to exit (a pidfd) and then removes the cluster's containers and network
// by label. When the cluster is closed normally, it is told so with SIGTERM, checks that nothing is left
// and exits. Even `kill -9 chaosbench` therefore leaves no container behind; `chaosbench clean` and the
// next docker run cover the rest (a reboot, a killed watchdog).
const ReaperCommand = "docker-reaper"

// reaper is the parent's handle on the watchdog.
type reaper struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startReaper starts the watchdog for cluster id and waits until it watches this process.
func startReaper(command []string, clusterID string, log *os.File) (*reaper, error) {
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("start docker reaper: find own executable: %w", err)
		}
		command = []string{exe, ReaperCommand}
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start docker reaper: %w", err)
	}
	defer readyR.Close()
	args := append(append([]string{}, command[1:]...), "--cluster", clusterID, "--owner", strconv.Itoa(os.Getpid()))
	cmd := exec.Command(command[0], args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = []*os.File{readyW} // fd 3: the watchdog writes "ok" once it watches us
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		readyW.Close()
		return nil, fmt.Errorf("start docker reaper: %w", err)
	}
	readyW.Close()
	r := &reaper{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(r.done)
	}()
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(readyR).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		if line == "ok" {
			return r, nil
		}
		r.kill()
		return nil, fmt.Errorf("start docker reaper %q: it did not confirm (%q); a test binary must call clusters.RunMemberIfRequested in TestMain", command, line)
	case <-time.After(10 * time.Second):
		r.kill()
		return nil, fmt.Errorf("start docker reaper %q: no confirmation within 10s; a test binary must call clusters.RunMemberIfRequested in TestMain", command)
	}
}

func (r *reaper) kill() {
	r.cmd.Process.Kill()
	<-r.done
}

// stop tells the watchdog that the cluster was closed; it makes sure nothing is left, and exits.
func (r *reaper) stop() error {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
		return nil
	case <-time.After(removeTimeout + 5*time.Second):
		r.kill()
		return errors.New("docker reaper did not exit; killed it")
	}
}

// RunReaper is the body of the hidden ReaperCommand: args are --cluster ID --owner PID. It returns the
// process exit code.
func RunReaper(args []string) int {
	fs := flag.NewFlagSet(ReaperCommand, flag.ContinueOnError)
	cluster := fs.String("cluster", "", "cluster id (label "+LabelCluster+")")
	ownerPID := fs.Int("owner", 0, "PID of the chaosbench process that owns the cluster")
	if err := fs.Parse(args); err != nil || *cluster == "" || *ownerPID == 0 {
		fmt.Fprintln(os.Stderr, "docker-reaper: usage: --cluster ID --owner PID")
		return 2
	}
	// Only our owner's word (SIGTERM) or its death ends the watch.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)

	ownerGone := make(chan struct{})
	pidfd, err := unix.PidfdOpen(*ownerPID, 0)
	switch {
	case err != nil || os.Getppid() != *ownerPID:
		// Already gone (or its PID reused): sweep at once.
		close(ownerGone)
	default:
		go func() {
			defer close(ownerGone)
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
					return
				}
			}
		}()
	}
	ready := os.NewFile(3, "ready")
	fmt.Fprintln(ready, "ok")
	ready.Close()

	reason := "chaosbench closed the cluster"
	select {
	case <-ownerGone:
		reason = fmt.Sprintf("chaosbench (pid %d) exited without closing the cluster", *ownerPID)
	case <-term:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := DockerClient(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s docker-reaper: %s, but Docker is unreachable: %v\n", time.Now().Format(time.RFC3339), reason, err)
		return 1
	}
	defer d.Close()
	report, err := removeLabelled(ctx, d.Client, LabelCluster+"="+*cluster, false)
	if !report.Empty() || err != nil {
		fmt.Fprintf(os.Stderr, "%s docker-reaper: %s; removed %s\n", time.Now().Format(time.RFC3339), reason, report)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "docker-reaper: %v\n", err)
		return 1
	}
	return 0
}

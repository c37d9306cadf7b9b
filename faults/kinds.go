package faults

import "time"

// Kinds of fault, in the order the documentation lists them.
const (
	KindKill      = "kill"
	KindRestart   = "restart"
	KindPause     = "pause"
	KindPartition = "partition"
	KindDelay     = "delay"
	KindBandwidth = "bandwidth"
	KindReset     = "reset"
	KindSlowDisk  = "slowdisk"
	KindDefrag    = "defrag"
	KindCompact   = "compact"
	KindReplace   = "replace"
	KindSnapshot  = "snapshot"
	KindUpgrade   = "upgrade"
	KindDowngrade = "downgrade"
	KindFailpoint = "failpoint"
	KindNemesis   = "nemesis"
)

// kindInfo describes what a kind of fault needs and takes.
type kindInfo struct {
	// defaultTarget applies when the entry names none; "" means the kind takes no target.
	defaultTarget TargetKind
	// defaultFor is the window's length when the entry gives no "+for"; 0: the fault is an operation whose
	// window is the operation itself.
	defaultFor time.Duration
	// needs is what the cluster must offer.
	needs need
	help  string
}

type need uint8

const (
	needNothing    need = iota // a client connection is enough (works on external clusters)
	needProcess                // process control (kill, stop, pause)
	needProxy                  // peer proxies
	needDisk                   // slowfs mounts, or strace for fdatasync
	needReplace                // membership changes with process control
	needImages                 // members that can be moved to another etcd release (docker clusters)
	needFailpoints             // members running failpoint builds, with their gofail endpoints
)

var kinds = map[string]kindInfo{
	KindKill:      {TargetRandom, 5 * time.Second, needProcess, "SIGKILL the targets, restart them when the window ends (=drop-unsynced: lose writes not yet fsynced, as in a power failure)"},
	KindRestart:   {TargetRandom, 0, needProcess, "stop the targets gracefully (SIGTERM) and start them again after the window"},
	KindPause:     {TargetRandom, 5 * time.Second, needProcess, "SIGSTOP the targets for the window, then SIGCONT"},
	KindPartition: {TargetLeader, 10 * time.Second, needProxy, "cut the targets off from the other members (=in|out: one direction only; =refuse: refuse connections instead of blackholing them; =clients: cut clients off too; =until-snapshot: hold it, +for at most, until the leader has compacted its log past the targets, so that healing sends them a snapshot)"},
	KindDelay:     {TargetLeader, 10 * time.Second, needProxy, "delay every message to and from the targets (=100ms~20ms: delay and jitter), keeping byte order"},
	KindBandwidth: {TargetLeader, 10 * time.Second, needProxy, "limit each link of the targets to a bandwidth (=1MB, =10Mbit: per second)"},
	KindReset:     {TargetLeader, 0, needProxy, "reset the targets' peer connections (=500ms with +for: again every 500 ms)"},
	KindSlowDisk:  {TargetLeader, 10 * time.Second, needDisk, "delay the targets' fsyncs (=50ms~10ms; |write=1ms delays writes too)"},
	KindDefrag:    {TargetAll, 0, needNothing, "defragment the targets' databases, one after the other"},
	KindCompact:   {"", 0, needNothing, "compact the keyspace at the current revision (=1s with +for: again every second)"},
	KindReplace:   {TargetFollower, 0, needReplace, "remove the target, wipe its data, add it back as a learner and promote it"},
	KindSnapshot:  {TargetLeader, 0, needNothing, "save a snapshot of the target's database"},
	KindUpgrade:   {TargetAll, 0, needImages, "rolling upgrade: move the targets to another etcd release (=v3.6.16) one at a time, followers first, each on its data"},
	KindDowngrade: {TargetAll, 0, needImages, "rolling downgrade (=v3.5.35): etcd's downgrade enable first when the minor version drops, then one member at a time"},
	KindFailpoint: {TargetLeader, 5 * time.Second, needFailpoints, "arm a gofail failpoint on the targets for the window (=raftBeforeSave:panic, =beforeCommit:sleep(200ms), =afterCommit:2*panic); a member that panics is started again on its data (needs --etcd-version vX --failpoints)"},
	KindNemesis:   {"", 5 * time.Second, needNothing, "a fault picked at random (=kill|pause|...: among these) at each occurrence"},
}

// KindNames lists the kinds of fault.
var KindNames = []string{KindKill, KindRestart, KindPause, KindPartition, KindDelay, KindBandwidth, KindReset,
	KindSlowDisk, KindDefrag, KindCompact, KindReplace, KindSnapshot, KindUpgrade, KindDowngrade, KindFailpoint, KindNemesis}

// KindHelp returns one line about a kind of fault.
func KindHelp(kind string) string { return kinds[kind].help }

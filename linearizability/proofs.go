package linearizability

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// Proofs remembers the per-key segments porcupine found linearizable, each by a fingerprint of
// everything its verdict depends on, so that a later check of a longer history of the same run does not
// check them again: a check of the history recorded so far, run while the load goes on (DuringLoad),
// leaves the segments it proved here, and the check after the load finds most of its segments among them.
//
// Why a remembered proof is as good as the search: porcupine's verdict on a segment is a function of the
// segment alone, of the key's model, and of the states it starts from (the model is the same code every
// time; only its lease expiries depend on the rest of the history). The fingerprint is a SHA-256 of all of
// it: the key, each starting state, each operation's every field as porcupine's model reads it (call and
// return time, client, revisions, compares, branch steps with the answers they carry), and, for every
// lease the segment names, what the check knows of its expiry (whether a failed revoke may have ended it,
// whether it was granted at all, the earliest it may expire). A segment of the later check with the same
// fingerprint is the same porcupine problem; anything that differs (an operation that was still in flight,
// a state the replay now knows better, a lease kept alive longer) is another fingerprint, and is checked.
// Only linearizable verdicts are remembered: a failing or undecided segment is always searched again,
// for its report.
//
// Proofs is safe for concurrent use. It holds a fingerprint per proved segment (the first 128 bits of
// the SHA-256): those the last check during the load met in a sorted array, 16 bytes each, and those
// proved since in a map. DuringLoad keeps only what its last check met (prune: a later, longer history
// cuts its segments as that check did, or later), and freezes the proofs at the load's end: sorted into a
// file without a name and mapped into memory, read only, so that the check after the load holds no more
// on the heap than the offline check (the pages are the kernel's, read back from the file when needed).
type Proofs struct {
	mu     sync.Mutex
	sorted []proof // met by the check before the last prune
	met    []bool  // by index of sorted: met since
	fresh  map[proof]struct{}
	frozen bool
	mapped []byte   // frozen: the sorted proofs, mapped from file
	file   *os.File // the file mapped
}

// proof is a segment's fingerprint.
type proof [16]byte

// NewProofs returns an empty set of proofs.
func NewProofs() *Proofs { return &Proofs{fresh: map[proof]struct{}{}} }

// Len returns the number of segments proved.
func (p *Proofs) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sorted) + len(p.fresh) + len(p.mapped)/len(proof{})
}

func (p *Proofs) has(f proof) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mapped != nil {
		n := len(p.mapped) / len(f)
		i := sort.Search(n, func(i int) bool { return bytes.Compare(p.mapped[i*len(f):(i+1)*len(f)], f[:]) >= 0 })
		if i < n && bytes.Equal(p.mapped[i*len(f):(i+1)*len(f)], f[:]) {
			return true
		}
	}
	if i, ok := slices.BinarySearchFunc(p.sorted, f, compareProofs); ok {
		if !p.frozen {
			p.met[i] = true
		}
		return true
	}
	_, ok := p.fresh[f]
	return ok
}

func (p *Proofs) add(f proof) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.fresh[f] = struct{}{}
	}
}

// prune forgets the proofs the check since the last prune did not meet (segments a longer history no
// longer has: forgetting one costs a search, never a verdict), and sorts the rest.
func (p *Proofs) prune() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		return
	}
	kept := make([]proof, 0, len(p.fresh)+len(p.sorted))
	for i, f := range p.sorted {
		if p.met[i] {
			kept = append(kept, f)
		}
	}
	for f := range p.fresh {
		kept = append(kept, f)
	}
	slices.SortFunc(kept, compareProofs)
	p.sorted, p.fresh = slices.Compact(kept), map[proof]struct{}{}
	p.met = make([]bool, len(p.sorted))
}

// freeze makes the proofs read-only, as they are: what a check proves from now on is not kept. It moves
// them into a file without a name in dir (or the temporary directory), mapped into memory; when that
// fails they stay on the heap, which changes nothing but the memory.
func (p *Proofs) freeze(dir string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		return
	}
	p.frozen, p.met = true, nil
	all := slices.Clone(p.sorted)
	for f := range p.fresh {
		all = append(all, f)
	}
	if len(all) == 0 {
		return
	}
	slices.SortFunc(all, compareProofs)
	all = slices.Compact(all)
	f, err := history.SpillFile(dir, "proofs")
	if err != nil {
		return
	}
	buf := make([]byte, 0, len(all)*len(proof{}))
	for _, pr := range all {
		buf = append(buf, pr[:]...)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return
	}
	mapped, err := syscall.Mmap(int(f.Fd()), 0, len(buf), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return
	}
	p.mapped, p.file, p.sorted, p.fresh = mapped, f, nil, map[proof]struct{}{}
}

// Close releases the proofs' file and mapping; they are empty after it.
func (p *Proofs) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sorted, p.met, p.fresh = nil, nil, map[proof]struct{}{}
	if p.mapped == nil {
		return nil
	}
	err := syscall.Munmap(p.mapped)
	p.mapped = nil
	if cerr := p.file.Close(); err == nil {
		err = cerr
	}
	return err
}

func compareProofs(a, b proof) int { return bytes.Compare(a[:], b[:]) }

// fingerprint hashes everything porcupine's verdict on sg depends on (see Proofs).
func (c *checker) fingerprint(sg segment) proof {
	f := fingerprinter{h: sha256.New()}
	f.str(c.key(sg.rank))
	f.int(int64(len(sg.init)))
	leases := []int64{}
	for _, st := range sg.init {
		f.state(st)
		leases = append(leases, st.r.lease)
	}
	f.int(int64(len(sg.ops)))
	for _, ko := range sg.ops {
		leases = f.keyOp(ko, leases)
	}
	slices.Sort(leases)
	for _, id := range slices.Compact(leases) {
		if id == 0 {
			continue
		}
		_, revoked := c.candRevok[id]
		l := c.leases[id]
		f.int(id)
		f.bool(revoked)
		f.bool(l == nil)
		if l != nil {
			f.int(l.minExpiry)
		}
	}
	var sum [sha256.Size]byte
	f.h.Sum(sum[:0])
	return proof(sum[:16])
}

// fingerprinter writes values into a hash unambiguously: numbers fixed-size, strings with their length.
type fingerprinter struct {
	h   hash.Hash
	buf [8]byte
}

func (f *fingerprinter) int(v int64) {
	binary.LittleEndian.PutUint64(f.buf[:], uint64(v))
	f.h.Write(f.buf[:])
}

func (f *fingerprinter) bool(b bool) {
	if b {
		f.int(1)
	} else {
		f.int(0)
	}
}

func (f *fingerprinter) str(s string) {
	f.int(int64(len(s)))
	f.h.Write([]byte(s))
}

func (f *fingerprinter) state(st kstate) {
	f.bool(st.exists)
	f.bool(st.any)
	f.int(int64(st.unk))
	f.rec(st.r)
	f.int(st.last)
	f.int(st.floor)
}

func (f *fingerprinter) rec(r rec) {
	f.int(int64(r.value))
	f.int(r.create)
	f.int(r.mod)
	f.int(r.version)
	f.int(r.lease)
}

func (f *fingerprinter) keyOp(ko *keyOp, leases []int64) []int64 {
	f.int(int64(ko.op))
	f.int(int64(ko.client))
	f.int(ko.call)
	f.str(ko.key)
	f.int(int64(len(ko.cmps)))
	for _, c := range ko.cmps {
		f.str(c.Key)
		f.str(string(c.Target))
		f.str(string(c.Result))
		f.int(c.Operand)
		f.int(int64(c.Value.ID))
		f.int(int64(c.Value.Size))
	}
	f.bool(ko.allCmps)
	for b := range 2 {
		f.int(int64(len(ko.branches[b])))
		for i := range ko.branches[b] {
			st := &ko.branches[b][i]
			f.str(string(st.kind))
			f.bool(st.known)
			f.optKV(st.result)
			f.int(st.count)
			f.bool(st.keysOnly)
			f.bool(st.countOnly)
			f.int(int64(st.value))
			f.int(st.lease)
			f.bool(st.checkPrev)
			f.optKV(st.prev)
			f.int(int64(st.deleted))
			leases = append(leases, st.lease)
			if st.result != nil {
				leases = append(leases, st.result.Lease)
			}
			if st.prev != nil {
				leases = append(leases, st.prev.Lease)
			}
		}
	}
	f.int(int64(ko.taken))
	f.int(ko.rev)
	f.int(ko.hdr)
	f.bool(ko.maybe)
	f.int(ko.revoke)
	f.int(ko.ret)
	f.bool(ko.observes)
	f.bool(ko.answered)
	return append(leases, ko.revoke)
}

// optKV writes a key-value an answer carried, or that there was none.
func (f *fingerprinter) optKV(kv *history.KV) {
	f.bool(kv != nil)
	if kv == nil {
		return
	}
	f.str(kv.Key)
	f.int(int64(kv.Value.ID))
	f.int(int64(kv.Value.Size))
	f.int(kv.CreateRevision)
	f.int(kv.ModRevision)
	f.int(kv.Version)
	f.int(kv.Lease)
}

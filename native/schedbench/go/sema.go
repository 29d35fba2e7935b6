package main

import (
	"sync"
	_ "unsafe" // for go:linkname
)

// Goroutines park on the Go runtime's own semaphore: the one sync.Mutex and
// sync.WaitGroup block on (no channel). These two entry points are exported to package
// sync by the runtime and remain reachable by go:linkname (they are on the Go linker's
// allowed list).

//go:linkname semacquire sync.runtime_Semacquire
func semacquire(addr *uint32)

//go:linkname semrelease sync.runtime_Semrelease
func semrelease(addr *uint32, handoff bool, skipframes int)

// parker is one goroutine's private park word and its link in a semaphore's queue.
type parker struct {
	wake uint32
	next *parker
	_    [48]byte
}

// semaphore is a counting semaphore with the same semantics as the other runtimes'
// (ours, Tokio, and the pthreads port's): V hands its unit to the oldest waiter, or
// raises the count (past 1 if need be) when nobody waits. The runtime semaphore alone
// does not give that: without handoff the poster's own next P takes the unit back
// before the woken goroutine runs, and with handoff the poster is forced to yield
// between its V and P; either way churn's P stops blocking. So waiters queue here in
// FIFO order and each parks on its private word, released without handoff.
type semaphore struct {
	mu          sync.Mutex
	count       int64
	first, last *parker
	_           [32]byte // one semaphore per cache line
}

// P takes one unit; me is the calling goroutine's own parker.
func (s *semaphore) P(me *parker) {
	s.mu.Lock()
	if s.count > 0 {
		s.count--
		s.mu.Unlock()
		return
	}
	me.next = nil
	if s.last == nil {
		s.first = me
	} else {
		s.last.next = me
	}
	s.last = me
	s.mu.Unlock()
	semacquire(&me.wake)
}

func (s *semaphore) V() {
	s.mu.Lock()
	w := s.first
	if w == nil {
		s.count++
		s.mu.Unlock()
		return
	}
	s.first = w.next
	if s.first == nil {
		s.last = nil
	}
	s.mu.Unlock()
	semrelease(&w.wake, false, 0)
}

func newSemaphores(n int) []semaphore { return make([]semaphore, n) }

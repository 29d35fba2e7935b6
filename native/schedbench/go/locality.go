package main

import (
	"fmt"
	"sync/atomic"
)

// locality: touch a data block, then sit on a random one-seat spot, pushing off (and
// waking) whoever sat there; with -S 1 the data block goes to the woken goroutine
// (see ../c/locality.c).
type localityWorker struct {
	wake semaphore
	data []uint64
}

func init() {
	var workers []localityWorker
	var spots []atomic.Pointer[localityWorker]
	var words, share int
	spotCount := func(o *options) int {
		if o.spots > 0 {
			return o.spots
		}
		return o.threads / 2
	}
	register(&benchmark{
		name: "locality", extraFlags: "swS", defaultThreadsPerProc: 32,
		validate: func(o *options) {
			if n := spotCount(o); n < 1 || o.threads < n+o.procs {
				usageError("-t %d must be at least spots (%d) + processors (%d)", o.threads, n, o.procs)
			}
		},
		setup: func(o *options) {
			words, share = o.workWords, o.share
			workers = make([]localityWorker, o.threads)
			spots = make([]atomic.Pointer[localityWorker], spotCount(o))
			for i := range workers {
				workers[i].data = make([]uint64, words)
				for w := range workers[i].data {
					workers[i].data[w] = uint64(w)
				}
			}
		},
		threadMain: func(index int) {
			me := &workers[index]
			rng := seed(index)
			for {
				data := me.data
				for w := range data {
					data[w] += uint64(index)
				}
				previous := spots[random(&rng)%uint64(len(spots))].Swap(me)
				if previous != nil {
					if share == 1 {
						me.data, previous.data = previous.data, data
					}
					previous.wake.V()
				}
				me.wake.P(&parkers[index])
				count(index)
				if mustStop(index) {
					return
				}
			}
		},
		drain: func() {
			for i := range spots {
				if sitting := spots[i].Swap(nil); sitting != nil {
					sitting.wake.V()
				}
			}
		},
		extraJSON: func() string {
			return fmt.Sprintf(", \"spots\": %d, \"work_words\": %d, \"share\": %v", len(spots), words, share == 1)
		},
	})
}

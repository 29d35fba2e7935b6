// schedbench: the scheduler micro-benchmarks (cycle, yield, churn, locality, transfer)
// on goroutines. Same options, semantics and output as the C ports in ../c: a human
// line, then the JSON line of docs/format-bench.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	defaultDuration = 5.0
	maxSamples      = 3600
)

type options struct {
	duration   float64
	warmup     float64
	iterations int64
	threads    int
	procs      int
	ring       int
	spots      int
	workWords  int
	share      int
	exhaust    int
}

// benchmark is what each benchmark file provides.
type benchmark struct {
	name                  string
	extraFlags            string // option letters accepted besides -d -i -t -p
	defaultThreadsPerProc int
	validate              func(o *options) // calls usageError on bad input; may be nil
	setup                 func(o *options)
	threadMain            func(index int)
	started               func() // right after the threads are released; may be nil
	drain                 func() // after stop: release threads blocked for good
	extraJSON             func() string
}

var benchmarks = map[string]*benchmark{}

func register(b *benchmark) { benchmarks[b.name] = b }

type paddedCounter struct {
	ops atomic.Uint64
	_   [56]byte
}

var (
	opts       options
	current    *benchmark
	counters   []paddedCounter
	stopFlag   atomic.Bool
	exited     atomic.Int64
	startGates []semaphore
	parkers    []parker // parkers[i] belongs to goroutine i
)

func usageError(format string, args ...any) {
	name := "schedbench-go"
	if current != nil {
		name = current.name + "-go"
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, fmt.Sprintf(format, args...))
	os.Exit(2)
}

func failure(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s-go: %s\n", current.name, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// count records one operation of thread index; only that goroutine writes its counter.
func count(index int) {
	c := &counters[index].ops
	c.Store(c.Load() + 1)
}

func mustStop(index int) bool {
	if opts.iterations > 0 && counters[index].ops.Load() >= uint64(opts.iterations) {
		stopFlag.Store(true)
	}
	return stopFlag.Load()
}

func seed(index int) uint64 { return 0x9E3779B97F4A7C15*uint64(index+1) | 1 }

func random(state *uint64) uint64 {
	x := *state
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*state = x
	return x
}

func totalOps() uint64 {
	var sum uint64
	for i := range counters {
		sum += counters[i].ops.Load()
	}
	return sum
}

func parseOptions(args []string) {
	fs := flag.NewFlagSet(current.name, flag.ContinueOnError)
	fs.SetOutput(os.Stdout)
	d := fs.Float64("d", 0, "measure for this many seconds (default 5)")
	fs.Float64Var(&opts.warmup, "W", 0, "run this many seconds before measuring")
	fs.Int64Var(&opts.iterations, "i", 0, "stop once one thread has done this many operations")
	t := fs.Int("t", 0, fmt.Sprintf("goroutines (default %d per processor)", current.defaultThreadsPerProc))
	fs.IntVar(&opts.procs, "p", 1, "processors (GOMAXPROCS)")
	fs.IntVar(&opts.ring, "r", 5, "threads per ring (cycle)")
	fs.IntVar(&opts.spots, "s", 0, "spots (churn, locality; default threads/2)")
	fs.IntVar(&opts.workWords, "w", 256, "words touched per operation (locality)")
	fs.IntVar(&opts.share, "S", 0, "1: hand data to the woken thread (locality)")
	fs.IntVar(&opts.exhaust, "e", 0, "1: non-leaders park instead of yielding (transfer)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		usageError("%v", err)
	}
	if fs.NArg() > 0 {
		usageError("unexpected argument '%s' (see -h)", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		given[f.Name] = true
		if !strings.Contains("ditpW", f.Name) && !strings.Contains(current.extraFlags, f.Name) {
			usageError("option -%s does not apply to %s", f.Name, current.name)
		}
	})
	opts.duration = *d
	if given["d"] && (!(opts.duration > 0) || opts.duration > maxSamples) {
		usageError("-d needs seconds in (0, %d], got %v", maxSamples, opts.duration)
	}
	if opts.warmup < 0 || opts.warmup > maxSamples {
		usageError("-W needs seconds in [0, %d], got %v", maxSamples, opts.warmup)
	}
	if given["d"] && given["i"] {
		usageError("give either -d or -i, not both")
	}
	if given["i"] && opts.iterations < 1 {
		usageError("-i needs an integer >= 1")
	}
	if !given["d"] && !given["i"] {
		opts.duration = defaultDuration
	}
	if opts.procs < 1 || opts.procs > 1024 {
		usageError("-p needs 1..1024 processors, got %d", opts.procs)
	}
	opts.threads = *t
	if !given["t"] {
		opts.threads = opts.procs * current.defaultThreadsPerProc
	}
	if opts.threads < 1 || opts.threads > 100000 {
		usageError("-t needs 1..100000 threads, got %d", opts.threads)
	}
	if opts.ring < 1 || opts.spots < 0 || opts.workWords < 1 || opts.share < 0 || opts.share > 1 ||
		opts.exhaust < 0 || opts.exhaust > 1 {
		usageError("bad -r/-s/-w/-S/-e value (see -h)")
	}
	if current.validate != nil {
		current.validate(&opts)
	}
}

func main() {
	if len(os.Args) < 2 || benchmarks[os.Args[1]] == nil {
		names := make([]string, 0, len(benchmarks))
		for n := range benchmarks {
			names = append(names, n)
		}
		usageError("usage: schedbench BENCHMARK [options]; BENCHMARK is one of %s", strings.Join(names, ", "))
	}
	current = benchmarks[os.Args[1]]
	parseOptions(os.Args[2:])
	runtime.GOMAXPROCS(opts.procs)

	counters = make([]paddedCounter, opts.threads)
	parkers = make([]parker, opts.threads)
	current.setup(&opts)
	startGates = newSemaphores(opts.threads)
	var wg sync.WaitGroup
	wg.Add(opts.threads)
	for i := 0; i < opts.threads; i++ {
		go func(index int) {
			defer wg.Done()
			startGates[index].P(&parkers[index])
			current.threadMain(index)
			exited.Add(1)
		}(i)
	}

	nsamples := maxSamples
	slice := 1.0
	if opts.iterations == 0 {
		nsamples = 1
		if opts.duration >= 2 {
			nsamples = int(opts.duration)
		}
		slice = opts.duration / float64(nsamples)
	}
	samples := []float64{}

	if current.started != nil {
		current.started()
	}
	for i := range startGates {
		startGates[i].V()
	}
	time.Sleep(time.Duration(opts.warmup * float64(time.Second)))
	baseline := totalOps()
	start := time.Now()
	sliceStart := start
	sliceOps := baseline
	for {
		time.Sleep(time.Millisecond)
		now := time.Now()
		stopping := stopFlag.Load()
		if opts.iterations == 0 {
			stopping = now.Sub(start).Seconds() >= opts.duration
		}
		if elapsed := now.Sub(sliceStart).Seconds(); elapsed >= slice-0.0005 || stopping {
			ops := totalOps()
			if len(samples) < nsamples && (elapsed >= slice*0.5 || len(samples) == 0) {
				samples = append(samples, float64(ops-sliceOps)/elapsed)
			}
			sliceOps = ops
			sliceStart = now
		}
		if stopping {
			break
		}
	}
	stopFlag.Store(true)
	elapsed := time.Since(start).Seconds()
	measured := totalOps() - baseline
	for exited.Load() < int64(opts.threads) {
		current.drain()
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	final := totalOps()

	opsPerSec := float64(measured) / elapsed
	nsPerOp := 0.0
	if measured > 0 {
		nsPerOp = elapsed * 1e9 / float64(measured)
	}
	perProc := opsPerSec / float64(opts.procs)
	fmt.Printf("%s go: %.0f ops/s, %.1f ns/op, %.0f ops/s per processor (%d processors, %d threads, %.2f s)\n",
		current.name, opsPerSec, nsPerOp, perProc, opts.procs, opts.threads, elapsed)
	parts := make([]string, len(samples))
	for i, s := range samples {
		parts[i] = fmt.Sprintf("%.3f", s)
	}
	extra := ""
	if current.extraJSON != nil {
		extra = current.extraJSON()
	}
	fmt.Printf("{\"benchmark\": \"sched-%s\", \"mode\": \"\", \"runtime\": \"go\", \"workers\": %d, "+
		"\"ops_per_sec\": %.3f, \"samples\": [%s], \"cycles_per_op\": null, \"extra\": {"+
		"\"ns_per_op\": %.3f, \"ns_per_op_per_proc\": %.3f, \"ops_per_sec_per_proc\": %.3f, "+
		"\"processors\": %d, \"threads\": %d, \"seconds\": %.6f, \"measured_ops\": %d, \"total_ops\": %d%s, "+
		"\"go_version\": \"%s\"}}\n",
		current.name, opts.procs, opsPerSec, strings.Join(parts, ", "), nsPerOp, nsPerOp*float64(opts.procs), perProc,
		opts.procs, opts.threads, elapsed, measured, final, extra, runtime.Version())
}

/*
 * scalecheck guest driver: runs as the initramfs's init (PID 1) inside the traced VM.
 *
 * Reads /batch.txt (written by the host runner: a line-based rendering of tests.jsonl,
 * see docs/tracer.md; a VM restored from its snapshot copies it from fw_cfg first), and for every test and repeat: builds the setup state on a fresh
 * tmpfs (or ramfs) directory, has the model's two processes build theirs (kept from one
 * repeat to the next, workers.c), runs call A on CPU 1 and then call B on CPU 2 between
 * marker instructions, and reports both results. The QEMU plugin records the kernel's
 * memory accesses between the markers; the host joins the two streams by the tag encoded
 * before each start marker.
 *
 * Output goes to QEMU's debug console (I/O port 0xe9): plain text lines, no tty layer.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver.h"

#define DEBUGCON_PORT 0xe9
/* The tests (the wire format, scalecheck_wire.h): in the probe boot's initramfs, else
 * copied here from QEMU's fw_cfg once the VM is restored from its snapshot. */
#define BATCH "/batch.txt"
/* QEMU's fw_cfg on a PC: a 16-bit selector port, a byte-wide data port, the directory of
 * named files at key 0x19 (docs/specs/fw_cfg.txt in QEMU's sources). */
#define FW_CFG_SELECTOR 0x510
#define FW_CFG_DATA 0x511
#define FW_CFG_FILE_DIR 0x19
#define FW_CFG_POLL_US 10000

const char *const TEST_DIRS[2] = {"/t/w0", "/t/w1"};
struct sc_wire_settings settings = {.repeats = 2, .timeout_ms = 5000, .fs = "tmpfs"};

/* ---- output: the reports go to the host through the debug console port ---- */

static void out_bytes(const char *s, size_t n)
{
	outsb(DEBUGCON_PORT, s, n);
}

void fatal(const char *what)
{
	sc_wire_fail(what, strerror(errno));
	reboot(RB_POWER_OFF);
	_exit(1);
}

/* ---- the batch of a restored VM, from fw_cfg ---- */

struct fw_cfg_file {
	uint32_t size; /* big-endian, as every number of the directory */
	uint16_t select;
	uint16_t reserved;
	char name[56];
};

static void fw_cfg_select(uint16_t key)
{
	outw(key, FW_CFG_SELECTOR);
}

/* The key of fw_cfg file `name` (its size in *size), or 0: QEMU has no such file. */
static uint16_t fw_cfg_find(const char *name, uint32_t *size)
{
	uint32_t count;
	fw_cfg_select(FW_CFG_FILE_DIR);
	insb(FW_CFG_DATA, &count, sizeof count);
	for (uint32_t i = 0; i < ntohl(count); i++) {
		struct fw_cfg_file f;
		insb(FW_CFG_DATA, &f, sizeof f);
		if (strncmp(f.name, name, sizeof f.name) == 0) {
			*size = ntohl(f.size);
			return ntohs(f.select);
		}
	}
	return 0;
}

/* Says WAIT and polls fw_cfg for the batch (the host snapshots the VM while it polls;
 * the restored VM's QEMU holds the batch), then copies it to BATCH: from there on a
 * restored VM runs exactly as one booted with its batch in the initramfs. */
static void wait_for_batch(void)
{
	uint32_t size;
	uint16_t key;
	if (ioperm(FW_CFG_SELECTOR, 2, 1) < 0)
		fatal("ioperm fw_cfg");
	sc_wire_waiting();
	while (!(key = fw_cfg_find(SC_WIRE_BATCH_FW_CFG, &size)))
		usleep(FW_CFG_POLL_US);
	char *text = malloc(size);
	int fd = open(BATCH, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (!text || fd < 0)
		fatal("copy the batch from fw_cfg");
	fw_cfg_select(key);
	insb(FW_CFG_DATA, text, size);
	for (uint32_t done = 0; done < size;) {
		ssize_t n = write(fd, text + done, size - done);
		if (n <= 0)
			fatal("write the batch");
		done += (uint32_t)n;
	}
	close(fd);
	free(text);
}

/* ---- main ---- */

static void mount_filesystems(const char *fs_type)
{
	mkdir("/proc", 0755);
	mkdir("/dev", 0755);
	mkdir("/t", 0755);
	if (mount("proc", "/proc", "proc", 0, NULL) < 0)
		fatal("mount /proc");
	if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) < 0 && errno != EBUSY)
		fatal("mount /dev");
	if (mount("scalecheck", "/t", fs_type, 0, NULL) < 0)
		fatal("mount test file system");
	for (int i = 0; i < 2; i++)
		if (mkdir(TEST_DIRS[i], 0777) < 0)
			fatal("mkdir test directory");
	/* No periodic writeback: a flusher cleaning inodes at random moments would decide
	 * whether a call finds its inode clean and takes the writeback list lock. */
	int fd = open("/proc/sys/vm/dirty_writeback_centisecs", O_WRONLY);
	if (fd < 0 || write(fd, "0\n", 2) != 2)
		fatal("disable periodic writeback");
	close(fd);
}

/* The same memory layout in every boot: with address-space randomization the driver's
 * stack, heap and mappings sit at other offsets each boot, so whether a call's region
 * touches a page for the first time (a fault) or grows a VMA tree node differs between
 * runs. Without transparent huge pages, khugepaged cannot collapse the driver's memory at
 * a moment that depends on the boot either. Both settings are inherited by every test
 * process; neither changes what the calls themselves do. */
static void fix_memory_layout(char **argv)
{
	int persona = personality(0xffffffff);
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) < 0)
		fatal("prctl PR_SET_THP_DISABLE");
	if (persona < 0 || persona & ADDR_NO_RANDOMIZE)
		return;
	if (personality(persona | ADDR_NO_RANDOMIZE) < 0)
		fatal("personality ADDR_NO_RANDOMIZE");
	execv("/init", argv);
	fatal("re-exec without address-space randomization");
}

int main(int argc, char **argv)
{
	(void)argc;
	if (ioperm(DEBUGCON_PORT, 1, 1) < 0)
		return 1;
	sc_wire_output(out_bytes, NULL);
	fix_memory_layout(argv);
	if (access(BATCH, F_OK) < 0)
		wait_for_batch();
	char *tests = sc_wire_read_batch(BATCH);
	if (!tests)
		fatal("read batch");
	if (sc_wire_read_settings(&tests, &settings) < 0)
		fatal("batch without settings");
	mount_filesystems(settings.fs);
	limit_socket_queues();
	int devnull = open("/dev/null", O_RDWR);
	if (devnull < 0 || dup2(devnull, DEVNULL_FD) < 0)
		fatal("open /dev/null");
	close(devnull);
	coordination_init();
	install_fault_handlers();
	sc_wire_ready((int)sysconf(_SC_NPROCESSORS_ONLN));
	if (settings.dump_facts)
		dump_kernel_facts();
	/* Warm-up: the first tests run once untraced-for-results, so one-time kernel work
	 * (first use of a CPU's random pool, slab caches filling) lands outside real runs. */
	long run_started = now_ms();
	run_batch(BATCH, tests);
	/* Guest-side run time of the tests (warm-up included), for the speed benchmarks. */
	sc_wire_done(now_ms() - run_started);
	sync();
	/* The probe's memory is read once the guest has powered off. A traced boot stays up:
	 * the host names the last test's data from guest memory after DONE, then stops QEMU. */
	if (settings.dump_facts)
		reboot(RB_POWER_OFF);
	for (;;)
		pause();
	return 0;
}

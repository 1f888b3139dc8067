/*
 * osu_ref: the C reference for movebench's shuffle (uni, bidi) and bcast kernels.
 *
 * Written for movebench, not copied: it follows the definitions of the OSU Micro-Benchmarks
 * (MVAPICH, https://mvapich.cse.ohio-state.edu/benchmarks/), as read in OMB 5.3.2's
 * mpi/pt2pt/osu_bw.c, mpi/pt2pt/osu_bibw.c, mpi/collective/osu_bcast.c and osu_coll.h
 * (the copy in github.com/sstsimulator/sst-macro, skeletons/osu-micro-benchmarks-5.3.2):
 *
 *   bw    rank 0 posts `window` MPI_Isend of `size` bytes to rank 1, MPI_Waitall, then waits for
 *         rank 1's 4-byte ack (MPI_Recv); rank 1 posts `window` MPI_Irecv, MPI_Waitall, sends the
 *         ack. `skip` untimed iterations, then `loop` timed ones on rank 0's clock.
 *         MB/s = size * loop * window / 1e6 / t.
 *   bibw  both ranks post `window` MPI_Irecv then `window` MPI_Isend, wait for the sends, then the
 *         receives; rank 0's clock. MB/s = 2 * size * loop * window / 1e6 / t.
 *         Counts for bw and bibw: loop 100, skip 10 up to 8 KiB; loop 20, skip 2 above; window 64.
 *   bcast every rank times each MPI_Bcast from root 0 on its own (MPI_Wtime before and after),
 *         then an untimed MPI_Barrier; `skip` calls are left out. Per rank: latency = sum / loop;
 *         printed: the average over ranks (OSU's figure), the minimum and the maximum, in us.
 *         Counts: loop 1000, skip 200 up to 8 KiB; loop 100, skip 10 above.
 *
 * Buffers are page-aligned (posix_memalign, as OSU's allocate_memory) and written once before any
 * timed loop (OSU's touch_data / set_buffer). Unlike OSU, which sweeps powers of two from 1 byte,
 * the sizes are given (-m), and each size may be measured `-r` times in a row, one line each, so
 * that a comparison takes the same statistic of both sides; -u first runs that many measurements of each
 * size that are not printed, as movebench's warm-up repetitions are not counted (without them the first
 * size's first measurement in a launch also pays for connecting the ranks). -t picks the thread level asked of
 * MPI_Init_thread; -p 2m aligns buffers to 2 MiB and asks for transparent huge pages (madvise).
 *
 * Output, one line per measurement: "<test> <size> <value> [<min> <max>]" (bw, bibw: MB/s, 1e6;
 * bcast: average, min and max latency over ranks, us). A header line starts with '#'.
 *
 * Built with -DOSU_REF_LIBRARY it is a shared library without main: osu_ref_bw, osu_ref_bibw and
 * osu_ref_bcast run one measurement over buffers the caller owns, in a process where mpi4py has
 * initialised the same MPI, so that bench/stream_loops.py can alternate C and Python repetition by
 * repetition, on the same buffers.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LARGE_MESSAGE_SIZE 8192
#define MAX_WINDOW 1024
#define ACK_BYTES 4
#define TAG_DATA 100
#define TAG_BACK 10
#define TAG_ACK 101

static MPI_Request req[2 * MAX_WINDOW];

/* MB/s on rank 0 (0 on rank 1); `r` needs ACK_BYTES more than size on rank 0 only for the ack. */
double osu_ref_bw(int rank, size_t size, int window, int loop, int skip, char *s, char *r) {
    double t_start = 0.0;
    for (int i = 0; i < loop + skip; i++) {
        if (rank == 0) {
            if (i == skip) t_start = MPI_Wtime();
            for (int j = 0; j < window; j++) MPI_Isend(s, (int)size, MPI_CHAR, 1, TAG_DATA, MPI_COMM_WORLD, req + j);
            MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
            MPI_Recv(r, ACK_BYTES, MPI_CHAR, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int j = 0; j < window; j++) MPI_Irecv(r, (int)size, MPI_CHAR, 0, TAG_DATA, MPI_COMM_WORLD, req + j);
            MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
            MPI_Send(s, ACK_BYTES, MPI_CHAR, 0, TAG_ACK, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - t_start;
    return rank == 0 ? size / 1e6 * loop * window / t : 0.0;
}

double osu_ref_bibw(int rank, size_t size, int window, int loop, int skip, char *s, char *r) {
    MPI_Request *sreq = req, *rreq = req + window;
    int peer = 1 - rank, stag = rank == 0 ? TAG_DATA : TAG_BACK, rtag = rank == 0 ? TAG_BACK : TAG_DATA;
    double t_start = 0.0;
    for (int i = 0; i < loop + skip; i++) {
        if (i == skip) t_start = MPI_Wtime();
        for (int j = 0; j < window; j++) MPI_Irecv(r, (int)size, MPI_CHAR, peer, rtag, MPI_COMM_WORLD, rreq + j);
        for (int j = 0; j < window; j++) MPI_Isend(s, (int)size, MPI_CHAR, peer, stag, MPI_COMM_WORLD, sreq + j);
        MPI_Waitall(window, sreq, MPI_STATUSES_IGNORE);
        MPI_Waitall(window, rreq, MPI_STATUSES_IGNORE);
    }
    double t = MPI_Wtime() - t_start;
    return 2.0 * size / 1e6 * loop * window / t;
}

/* This rank's average latency in us; osu_bcast prints the average of it over ranks. */
double osu_ref_bcast(size_t size, int loop, int skip, char *buf) {
    double timer = 0.0;
    for (int i = 0; i < loop + skip; i++) {
        double t0 = MPI_Wtime();
        MPI_Bcast(buf, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
        double t1 = MPI_Wtime();
        if (i >= skip) timer += t1 - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return timer * 1e6 / loop;
}

#ifndef OSU_REF_LIBRARY
static void usage(void) {
    fprintf(stderr, "usage: osu_ref bw|bibw|bcast -m SIZE[,SIZE...] [-w WINDOW] [-r REPEATS] [-u WARMUPS] [-i LOOP] "
                    "[-s SKIP] [-t single|funneled|serialized|multiple] [-p 4k|2m]\n");
}

static char *alloc_touched(size_t bytes, size_t align, int huge, int fill) {
    void *p = NULL;
    if (posix_memalign(&p, align, bytes ? bytes : 1) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    memset(p, fill, bytes);
    return p;
}

static void counts(int bcast, size_t size, int *loop, int *skip) {
    int large = size > LARGE_MESSAGE_SIZE;
    if (bcast) {
        *loop = large ? 100 : 1000;
        *skip = large ? 10 : 200;
    } else {
        *loop = large ? 20 : 100;
        *skip = large ? 2 : 10;
    }
}

int main(int argc, char **argv) {
    const char *test = argc > 1 ? argv[1] : "";
    int bcast = strcmp(test, "bcast") == 0, bibw = strcmp(test, "bibw") == 0, bw = strcmp(test, "bw") == 0;
    if (!bcast && !bibw && !bw) {
        usage();
        return 2;
    }
    size_t sizes[64];
    int nsizes = 0, window = 64, repeats = 1, warmups = 0, loop_arg = 0, skip_arg = -1, huge = 0;
    int required = MPI_THREAD_SINGLE;
    const char *level_name = "single";
    int opt;
    optind = 2;
    while ((opt = getopt(argc, argv, "m:w:r:u:i:s:t:p:")) != -1) {
        switch (opt) {
        case 'm':
            for (char *tok = strtok(optarg, ","); tok && nsizes < 64; tok = strtok(NULL, ","))
                sizes[nsizes++] = strtoull(tok, NULL, 10);
            break;
        case 'w': window = atoi(optarg); break;
        case 'r': repeats = atoi(optarg); break;
        case 'u': warmups = atoi(optarg); break;
        case 'i': loop_arg = atoi(optarg); break;
        case 's': skip_arg = atoi(optarg); break;
        case 't':
            level_name = optarg;
            if (!strcmp(optarg, "single")) required = MPI_THREAD_SINGLE;
            else if (!strcmp(optarg, "funneled")) required = MPI_THREAD_FUNNELED;
            else if (!strcmp(optarg, "serialized")) required = MPI_THREAD_SERIALIZED;
            else if (!strcmp(optarg, "multiple")) required = MPI_THREAD_MULTIPLE;
            else { usage(); return 2; }
            break;
        case 'p': huge = !strcmp(optarg, "2m"); break;
        default: usage(); return 2;
        }
    }
    if (nsizes == 0 || window < 1 || window > MAX_WINDOW || repeats < 1 || warmups < 0) {
        usage();
        return 2;
    }
    int provided, rank, nranks;
    MPI_Init_thread(&argc, &argv, required, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if ((bw || bibw) && nranks != 2) {
        if (rank == 0) fprintf(stderr, "osu_ref %s needs exactly 2 ranks, not %d\n", test, nranks);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t largest = 0;
    for (int k = 0; k < nsizes; k++) largest = sizes[k] > largest ? sizes[k] : largest;
    size_t align = huge ? (size_t)2 << 20 : (size_t)sysconf(_SC_PAGESIZE);
    char *s = alloc_touched(largest + ACK_BYTES, align, huge, 'a');
    char *r = alloc_touched(largest + ACK_BYTES, align, huge, 'b');
    if (!s || !r) MPI_Abort(MPI_COMM_WORLD, 3);
    if (rank == 0)
        printf("# osu_ref %s ranks %d window %d thread_level %s provided %d pages %s\n", test, nranks, window,
               level_name, provided, huge ? "2m" : "4k");
    for (int k = 0; k < nsizes; k++) {
        int loop, skip;
        counts(bcast, sizes[k], &loop, &skip);
        if (loop_arg > 0) loop = loop_arg;
        if (skip_arg >= 0) skip = skip_arg;
        for (int rep = -warmups; rep < repeats; rep++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (bcast) {
                double lat = osu_ref_bcast(sizes[k], loop, skip, s), sum, lo, hi;
                MPI_Reduce(&lat, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
                MPI_Reduce(&lat, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
                MPI_Reduce(&lat, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                if (rank == 0 && rep >= 0) printf("bcast %zu %.4f %.4f %.4f\n", sizes[k], sum / nranks, lo, hi);
            } else {
                double mbs = bw ? osu_ref_bw(rank, sizes[k], window, loop, skip, s, r)
                                : osu_ref_bibw(rank, sizes[k], window, loop, skip, s, r);
                if (rank == 0 && rep >= 0) printf("%s %zu %.4f\n", test, sizes[k], mbs);
            }
            fflush(stdout);
        }
    }
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
#endif

/* Predict's transport: messages without payload between the representatives of a folded mesh.
 *
 * Under mdc_transport_set_dry every message is one MPI message of a dry_header: the sender's
 * stamps (its clock, its egress link, the link class between the two mesh ranks), the size the
 * message stands for, the sender and whether it mirrors a folded rank's message. The mesh's
 * ranks are its coordinates on `naxes` axes, the first fastest; the ranks with coordinate 0 on
 * every folded axis run (the representatives), the others are folded onto them.
 *
 * Why mirroring is exact on a symmetric mesh: when every rank of a role does the same work
 * (tensor-parallel and data-parallel peers of a dense model, the same stage), their clocks and
 * messages are the same up to the translation that maps one onto another. A representative Q
 * sending to folded p sends what the translated sender sends to p's representative P, at the
 * same virtual time; P takes it where it receives from a folded rank of Q's role. Taken in order
 * per (sender, tag), the k-th such message is the k-th such receive: both are the k-th of that
 * role pair in a schedule all ranks of a role run alike. A receive that finds a message of the
 * wrong kind (a mirror where a representative's own send was due, or the reverse) fails with
 * MDC_ERR_MISMATCH: that communication is not symmetric over the folded axes. A mirrored message
 * whose size differs from its receive's (a ring's uneven last chunk) is taken and its difference
 * counted (mdc_transport_fold_mismatch). */
#include <stdlib.h>

#include "transport_internal.h"

mdc_status mdc_transport_set_dry(mdc_transport *t, int naxes, const int *dims, unsigned folded) {
    if (!t->dev) return mdc_fail(MDC_ERR_INVALID, "mdc_transport_set_dry: the transport has no device");
    if (naxes < 1 || naxes > 16) return mdc_fail(MDC_ERR_INVALID, "mdc_transport_set_dry: %d axes", naxes);
    long n = 1;
    for (int a = 0; a < naxes; a++) {
        if (dims[a] < 1 || n * dims[a] > (1L << 24))
            return mdc_fail(MDC_ERR_INVALID, "predict: a mesh of more than 2^24 ranks (axis %d of size %d)", a,
                            dims[a]);
        n *= dims[a];
    }
    int *rep = malloc((size_t)n * sizeof *rep), *rep_mpi = malloc((size_t)n * sizeof *rep_mpi);
    if (!rep || !rep_mpi) {
        free(rep);
        free(rep_mpi);
        return mdc_fail(MDC_ERR_OOM_HOST, "predict: the fold of %ld ranks", n);
    }
    int reps = 0, me = -1, mpi_rank = 0;
    MPI_Comm_rank(t->comm, &mpi_rank);
    for (long r = 0; r < n; r++) {
        long stride = 1, off = 0, rest = r;
        for (int a = 0; a < naxes; a++) { /* zero the folded coordinates */
            long c = rest % dims[a];
            rest /= dims[a];
            if (folded >> a & 1u) off += c * stride;
            stride *= dims[a];
        }
        rep[r] = (int)(r - off);
        if (off == 0) {
            if (reps == mpi_rank) me = (int)r;
            rep_mpi[r] = reps++;
        }
    }
    for (long r = 0; r < n; r++) rep_mpi[r] = rep_mpi[rep[r]];
    if (reps != t->mpi_size) {
        free(rep);
        free(rep_mpi);
        return mdc_fail(MDC_ERR_INVALID,
                        "predict: the folded mesh of %ld ranks has %d representatives; %d processes run", n, reps,
                        t->mpi_size);
    }
    free(t->rep);
    free(t->rep_mpi);
    t->rep = rep, t->rep_mpi = rep_mpi;
    t->dry = 1, t->rank = me, t->size = (int)n;
    return MDC_OK;
}

int mdc_transport_rep(const mdc_transport *t, int r) { return t->dry ? t->rep[r] : r; }
double mdc_transport_fold_mismatch(const mdc_transport *t) { return t ? t->fold_mismatch : 0; }
int mdc_i_dry_mpi_peer(const mdc_transport *t, int peer) { return t->rep_mpi[peer]; }

int mdc_i_dry_post(mdc_request *r, int tag) {
    mdc_transport *t = r->t;
    int rc;
    r->pack = r->inl; /* sized for a dry_header by request_new */
    if (r->is_send) {
        dry_header h;
        memset(&h, 0, sizeof h);
        h.stamp = r->stamp, h.bytes = r->bytes, h.from = t->rank;
        h.mirror = t->rep[r->peer_world] != r->peer_world;
        memcpy(r->pack, &h, sizeof h);
        rc = MPI_Isend(r->pack, (int)sizeof h, MPI_BYTE, r->mpi_peer, tag, t->comm, &r->mreq[0]);
    } else {
        rc = MPI_Irecv(r->pack, (int)sizeof(dry_header), MPI_BYTE, r->mpi_peer, tag, t->comm, &r->mreq[0]);
    }
    r->nmreq = 1;
    r->posted = r->npieces; /* nothing left to post piece by piece */
    return rc;
}

mdc_msg_stamp mdc_i_dry_stamp(const mdc_request *r) {
    dry_header h;
    memcpy(&h, r->pack, sizeof h);
    return h.stamp;
}

mdc_status mdc_i_dry_check(mdc_transport *t, const mdc_request *r, const dry_header *h, size_t got) {
    int q = r->peer_world, mirror = t->rep[q] != q;
    if (got != sizeof *h || h->from != t->rep[q] || h->mirror != mirror)
        return mdc_fail(MDC_ERR_MISMATCH,
                        "rank %d: predict expected %s from rank %d and got %s from rank %d: this communication is "
                        "not symmetric over the folded mesh axes (predict with --no-fold)",
                        t->rank, mirror ? "a mirrored message" : "a message", q,
                        got != sizeof *h ? "a malformed message"
                        : h->mirror      ? "a mirrored message"
                                         : "a message",
                        h->from);
    if (!mirror && h->bytes != r->bytes)
        return mdc_fail(MDC_ERR_MISMATCH,
                        "rank %d: expected %zu bytes from rank %d, got %llu (sizes differ between ranks?)", t->rank,
                        r->bytes, q, (unsigned long long)h->bytes);
    if (h->bytes != r->bytes) t->fold_mismatch += h->bytes > r->bytes ? h->bytes - r->bytes : r->bytes - h->bytes;
    return MDC_OK;
}

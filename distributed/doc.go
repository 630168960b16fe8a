// Package distributed is the toolkit's seam to a distributed engine: a Comm is a
// group of Size processes (ranks 0 … Size−1) that run the same program and
// combine their data with collective operations: AllreduceSum32 and
// AllreduceSum64 (every rank ends with the element-wise sum over the ranks),
// Bcast (every rank ends with root's bytes), Gather (root receives every
// rank's bytes, in rank order) and Barrier.
//
// Two implementations: Local, the group of one process, whose collectives
// are identities (a program written against Comm runs unchanged without
// MPI), and Init, which joins the MPI job the process was started in
// (mpirun -np N prog …) through Open MPI's libmpi.so.40.
//
// Why MPI, and why loaded at run time. MPI (Open MPI here; Debian packages
// openmpi-bin and libopenmpi-dev) is the transport under Horovod and most
// HPC training: mpirun starts the processes on one or many hosts, wires
// them over shared memory, TCP or InfiniBand, and its MPI_Allreduce picks a
// ring, tree or recursive-doubling algorithm by message size. The library is
// loaded with github.com/ebitengine/purego, as package blas loads OpenBLAS:
// the binary builds with CGO_ENABLED=0, starts on machines without MPI and
// says nothing about it unless asked (Init is only called when Detect says
// the process runs under mpirun, or when the user asks for it).
//
// Open MPI's handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, …) are addresses
// of global symbols of the library (ompi_mpi_comm_world, ompi_mpi_float,
// ompi_mpi_op_sum, …), which Init looks up with dlsym; MPI_IN_PLACE is the
// address 1. This binds Init to Open MPI's ABI (MPICH's handles are
// integers); another library is an error that says so.
//
// Threads. Every MPI call of a Comm from Init runs on one goroutine locked
// to its OS thread, so the library is initialised at MPI_THREAD_FUNNELED
// and a Comm may be used from any goroutine; calls are serialised in the
// order they are made. Collectives must be called by every rank in the same
// order, as MPI requires.
//
// Failure. The communicator returns errors (MPI_ERRORS_RETURN) rather than
// aborting, so a failed collective comes back as an error naming the
// operation and MPI's message. When a rank dies, mpirun ends the others and
// prints which rank died and how; Abort ends the whole job from one rank.
package distributed

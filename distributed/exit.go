package distributed

import "os"

// exit ends the process for Local().Abort, as MPI_Abort ends an MPI job:
// the one place outside cmd/roformer that exits, because Abort's contract
// is to end the job.
var exit = os.Exit

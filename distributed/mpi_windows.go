package distributed

import "errors"

// LibraryNames is empty on Windows: Init supports Open MPI only.
var LibraryNames []string

// Init is not supported on Windows (Open MPI does not run there; MS-MPI's
// handles are integers).
func Init(path string) (Comm, error) {
	return nil, errors.New("distributed: MPI is not supported on windows")
}

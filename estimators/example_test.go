package estimators

import (
	"fmt"
	"math"
)

func ExampleColumns_Validate() {
	cols := goldenCols()
	cols.Score[1] = math.NaN()
	cols.Group[8] = 7
	cols.Agent[0] = 3
	fmt.Println(cols.Validate())
	// Output: estimators: invalid columns: non-finite score at row 1 (NaN); Agent code not below NumAgents=3 at row 0 (3); rows of a group are not contiguous (shards must be sorted by uid): group 7 resumes at row 8 after its rows ended at row 4
}

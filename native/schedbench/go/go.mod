module scalecheck/schedbench

go 1.22

from ctsim.cli import main

main()

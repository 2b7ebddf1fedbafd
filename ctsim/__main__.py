from ctsim.cli.app import main

main()

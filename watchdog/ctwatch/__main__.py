from ctwatch.cli import main

main()

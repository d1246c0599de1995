from rocmstack.cli import main

main()
